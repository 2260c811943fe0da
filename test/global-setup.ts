import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { packageRoot } from '../src/util/paths.js';
import { prepareDocker } from './helpers/docker.js';

/** Set once this process has run the setup: vitest runs a global setup once per project (vitest.config.ts). */
const done = Symbol.for('a2rl.test.global-setup');

/**
 * What every lane needs ready before its files start, done once: the build (the MCP tests run the built server,
 * dist/, so they never test stale code), and the Docker engine and image, which two lanes starting at once would each
 * start and build (test/helpers/docker.ts; each file still asks it why Docker is unavailable, at no cost once ready).
 */
export default async function setup(_project: TestProject): Promise<void> {
  const state = globalThis as { [done]?: Promise<void> };
  state[done] ??= (async () => {
    execFileSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: packageRoot, stdio: 'inherit' });
    await prepareDocker();
  })();
  await state[done];
}
