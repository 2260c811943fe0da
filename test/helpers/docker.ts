import Docker from 'dockerode';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { DockerBackend } from '../../sandbox/docker.js';
import { buildImage, imageTag } from '../../sandbox/images/build.js';

/** How the tests start an engine where none answers: Debian's dockerd, no bridge or iptables, its own data root. */
const dataRoot = '/var/lib/a2rl-docker';
const dockerdLog = '/var/log/a2rl-dockerd.log';

let prepared: Promise<string | undefined> | undefined;

/** Held while one test process starts the engine and builds the image: files starting together never do it twice. */
const lockFile = '/tmp/a2rl-test-docker.lock';

/**
 * Makes the Docker backend usable for the tests that need it, and only for them (a file that never asks starts no
 * engine): starts dockerd when no engine answers and builds the micro image when it is missing (once; the engine
 * caches it), under a lock shared by the test processes. Resolves with why Docker cannot be used here, or undefined.
 * With A2RL_REQUIRE_DOCKER=1 (CI sets it) that is an error, never a skip.
 */
export function prepareDocker(): Promise<string | undefined> {
  prepared ??= exclusively(prepare).then((reason) => {
    if (reason && process.env.A2RL_REQUIRE_DOCKER === '1')
      throw new Error(`A2RL_REQUIRE_DOCKER=1, but the Docker tests cannot run: ${reason}`);
    return reason;
  });
  return prepared;
}

/**
 * Runs `work` holding an exclusive lock on {@link lockFile}. flock(1) holds it: it says so on its stdout, and lets go
 * when its stdin closes, so a test process that dies never leaves the lock taken.
 */
async function exclusively<T>(work: () => Promise<T>): Promise<T> {
  const holder = spawn('flock', ['--exclusive', lockFile, '-c', 'echo held; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once('data', () => resolve());
    holder.once('error', reject);
    holder.once('exit', (code) => reject(new Error(`flock ${lockFile} exited with ${code} before taking the lock`)));
  });
  try {
    return await work();
  } finally {
    holder.stdin.end();
  }
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
