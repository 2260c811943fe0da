import { execFileSync } from 'node:child_process';
import { packageRoot } from '../src/util/paths.js';

/**
 * What every test file needs ready before two of them start at once (vitest.config.ts): the build (the MCP tests run
 * the built server, dist/, so they never test stale code). Services start lazily, only in the files that need them:
 * the Docker engine and its image in those that call prepareDocker (test/helpers/docker.ts, under a lock, so two
 * files starting together never start and build them twice), so one file runs without unrelated services.
 */
export default function setup(): void {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: packageRoot, stdio: 'inherit' });
}
