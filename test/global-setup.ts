import { execFileSync } from 'node:child_process';
import { packageRoot } from '../src/util/paths.js';
import { prepareDocker } from './helpers/docker.js';

/**
 * What every test file needs ready before two of them start at once (vitest.config.ts): the build (the MCP tests run
 * the built server, dist/, so they never test stale code), and the Docker engine and its image, which two files
 * starting together would each start and build (test/helpers/docker.ts; each file still asks it why Docker is
 * unavailable, at no cost once ready).
 */
export default async function setup(): Promise<void> {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: packageRoot, stdio: 'inherit' });
  await prepareDocker();
}
