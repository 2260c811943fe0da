import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root (holds package.json and tasks/), whether running from src/ or dist/. */
export const packageRoot: string = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

function findPackageRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === 'a2rl-bench') return dir;
    if (dirname(dir) === dir) throw new Error(`a2rl-bench: package.json not found above ${start}`);
  }
}

export const tasksRoot = join(packageRoot, 'tasks');

/** The built command line, the one entry point every spawned server, agent replay and test runs. */
export const cliEntry = join(packageRoot, 'dist', 'src', 'cli', 'main.js');

/** Where runs, submissions and the store live: $A2RL_HOME, else ~/.a2rl. */
export function defaultHome(): string {
  return resolve(process.env.A2RL_HOME ?? join(homedir(), '.a2rl'));
}
