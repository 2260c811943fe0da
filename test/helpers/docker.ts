import Docker from 'dockerode';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { DockerBackend } from '../../sandbox/docker.js';
import { buildImage, imageTag } from '../../sandbox/images/build.js';

/** How the tests start an engine where none answers: Debian's dockerd, no bridge or iptables, its own data root. */
const dataRoot = '/var/lib/a2rl-docker';
const dockerdLog = '/var/log/a2rl-dockerd.log';

let prepared: Promise<string | undefined> | undefined;

/**
 * Makes the Docker backend usable for the tests: starts dockerd when no engine answers
 * and builds the micro image when it is missing (once; the engine caches it). Resolves
 * with why Docker cannot be used here, or undefined. With A2RL_REQUIRE_DOCKER=1 (CI sets it)
 * that is an error, never a skip.
 */
export function prepareDocker(): Promise<string | undefined> {
  prepared ??= prepare().then((reason) => {
    if (reason && process.env.A2RL_REQUIRE_DOCKER === '1')
      throw new Error(`A2RL_REQUIRE_DOCKER=1, but the Docker tests cannot run: ${reason}`);
    return reason;
  });
  return prepared;
}

async function prepare(): Promise<string | undefined> {
  const docker = new Docker();
  if (!(await answers(docker))) {
    const why = startDockerd();
    if (why) return why;
    for (let tries = 0; tries < 60 && !(await answers(docker)); tries++) await new Promise((r) => setTimeout(r, 500));
    if (!(await answers(docker))) return `dockerd did not answer within 30 s (see ${dockerdLog})`;
  }
  const started = Date.now();
  await buildImage(docker, 'micro', { log: (line) => process.stderr.write(`[micro image] ${line}\n`) });
  if (Date.now() - started > 5000)
    process.stderr.write(`[micro image] ${imageTag('micro')} built in ${Math.round((Date.now() - started) / 1000)} s\n`);
  return new DockerBackend({ owner: 'probe' }).unavailableReason();
}

async function answers(docker: Docker): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

function startDockerd(): string | undefined {
  if (spawnSync('dockerd', ['--version']).error) return 'dockerd is not installed (Debian package docker.io; scripts/setup.sh installs it)';
  if (process.getuid?.() !== 0) return 'no Docker engine answers and starting dockerd needs root';
  mkdirSync(dataRoot, { recursive: true });
  const log = openSync(dockerdLog, 'a');
  // Outlives the tests on purpose: the next run finds the engine and its image cache.
  const child = spawn('dockerd', ['--data-root', dataRoot, '--iptables=false', '--bridge=none', '--host', 'unix:///var/run/docker.sock'], {
    detached: true,
    stdio: ['ignore', log, log],
  });
  child.unref();
  return undefined;
}
