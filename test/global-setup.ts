import { execFileSync } from 'node:child_process';
import { packageRoot } from '../src/util/paths.js';

/** The MCP tests run the built server (dist/); build it first so they never test stale code. */
export default function buildOnce(): void {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: packageRoot, stdio: 'inherit' });
}
