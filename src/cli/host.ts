import { type Command, Option } from 'commander';
import { buildImage, type ImageName, imageNames } from '../../sandbox/images/build.js';
import { sharedIdentityReason } from '../../sandbox/job-identity.js';
import { createBackend, sandboxNames } from '../../sandbox/registry.js';
import { imageOvercommitWarning, kernelStorageUnavailable } from '../../sandbox/run-storage.js';
import { cgroupEnforcement, slowCgroupMovesReason } from '../../sandbox/cgroup.js';
import { readHostGpuDevices } from '../../sandbox/gpu-devices.js';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';
import { answeringDockerEngine } from './docker-engine.js';
import { gpuReport } from './doctor-gpu.js';
import { agentNodeRequirements } from '../launch/agents.js';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { lowSpaceWarning } from '../store/disk-full.js';
import { freeBytes } from '../util/disk-usage.js';
import { Store } from '../store/store.js';
import { defaultHome } from '../util/paths.js';

/** `a2rl doctor` and `a2rl images build`: what this host can run, and the Docker backend's images. */
export function addHostCommands(program: Command): void {
  program
    .command('doctor')
    .description(
      'report which sandbox backends work on this host, and why the others do not; its per-job limits; then its GPUs, if any. ' +
        'A line that cannot work says FAILED (a backend: unavailable)',
    )
    .addOption(
      new Option('--shared-root <dir>', 'slurm: the folder every node sees at the same path, as serve takes it').env('A2RL_SHARED_ROOT'),
    )
    .option(
      '--require <names>',
      `exit 1, with one line on stderr for each, when any of these cannot work here (comma-separated): ${requirementNames.join(', ')}`,
    )
    .action(async (options: { sharedRoot?: string; require?: string }) => {
      const required = parseRequirements(options.require);
      // Why each requirement cannot work here, filled as the lines are written; absent: it works.
      const missing = new Map<Requirement, string>();
      let usable = 0;
      // Backends that start jobs on this host, where the GPU lines run a sandboxed job on GPU 0 (Slurm's GPUs are its nodes').
      const local: Array<{ name: string; backend: SandboxBackend }> = [];
      for (const name of sandboxNames) {
        const backend = createBackend(name, `doctor-${process.pid}`, { slurm: { sharedRoot: options.sharedRoot } });
        const reason = await backend.unavailableReason();
        if (!reason) usable++;
        else missing.set(name as Requirement, reason);
        if (!reason && !backend.scheduler) local.push({ name, backend });
        const cluster =
          backend.scheduler &&
          `; up to ${backend.scheduler.maxGpusPerJob()} GPU(s) per job, compute measured by ${backend.scheduler.accounting}`;
        process.stdout.write(`${name}\t${reason ? `unavailable: ${reason}` : `works${cluster ?? ''}`}\n`);
      }
      const limits = limitsLines();
      if (limits.failed) missing.set('limits', limits.failed);
      for (const line of limits.lines) process.stdout.write(`limits\t${line}\n`);
      process.stdout.write(`disk\t${homeSpace(defaultHome())}\n`);
      const overcommit = liveImagesOvercommit(defaultHome());
      if (overcommit) process.stdout.write(`disk\twarning: ${overcommit}\n`);
      const noImages = kernelStorageUnavailable();
      if (noImages) missing.set('kernel-storage', noImages);
      process.stdout.write(
        `storage\t${noImages ? `disk quota by walk, not the kernel: ${noImages}` : "disk quota by the kernel: each run's workspace is an ext4 image of its own"}\n`,
      );
      process.stdout.write(`jobs\t${sharedIdentityReason() ?? "each run's jobs run as an unprivileged host uid of their own"}\n`);
      const noPrlimit = prlimitMissing();
      if (noPrlimit) missing.set('checks', noPrlimit);
      process.stdout.write(
        `checks\t${noPrlimit ? `FAILED: ${noPrlimit}` : 'contamination checks run in a process of their own under prlimit (address space, CPU-seconds)'}\n`,
      );
      const nodeMajor = Number(process.versions.node.split('.')[0]);
      if (nodeMajor < minimumNode)
        missing.set('node', `Node ${process.versions.node} is older than ${minimumNode}: install Node ${minimumNode} or newer`);
      // Each installed agent CLI's own Node requirement (its package's engines.node): npm only warns of it.
      for (const { agent, range, met } of agentNodeRequirements())
        process.stdout.write(
          `agents\t${agent} asks for Node ${range}: ${met === false ? `this Node ${process.versions.node} does not meet it (upgrade Node)` : met ? 'met' : 'not checked'}\n`,
        );
      // The sandboxed GPU probes bind GPU 0's device node, read (once, in the background) from nvidia-smi.
      await readHostGpuDevices();
      const gpuLines = await gpuReport(local);
      for (const line of gpuLines) process.stdout.write(`${line}\n`);
      // The GPU works when every GPU line does: the GPUs, the runtime, a sandboxed job on each local backend.
      const gpuFailure = gpuLines.find((line) => !/^[^\t]*\tok\b/.test(line));
      if (gpuFailure) missing.set('gpu', gpuFailure.replace('\t', ': '));
      if (usable === 0) process.exitCode = 1;
      for (const name of required) {
        const why = missing.get(name);
        if (why === undefined) continue;
        process.stderr.write(`doctor: required ${name} cannot work here: ${why}\n`);
        process.exitCode = 1;
      }
    });

  program
    .command('images')
    .description('sandbox images of the docker backend (sandbox/images/)')
    .command('build <name>')
    .description('build an image into the local Docker engine: micro (no registry needed: debootstrap, then its Dockerfile)')
    .option('--force', 'rebuild even when the image exists')
    .action(async (name: string, options: { force?: boolean }) => {
      if (!imageNames.includes(name as ImageName)) {
        throw new A2rlError('INVALID_INPUT', `No image "${name}"; build one of: ${imageNames.join(', ')}.`);
      }
      const docker = await answeringDockerEngine();
      await buildImage(docker, name as ImageName, { force: options.force, log: (line) => process.stderr.write(`${line}\n`) });
    });
}

/** Where the home's live runs' images may outgrow its free space (sandbox/run-storage.ts), read from its store if it has one. */
function liveImagesOvercommit(home: string): string | undefined {
  if (!existsSync(join(home, 'store.sqlite'))) return undefined;
  const store = new Store(join(home, 'store.sqlite'));
  try {
    return imageOvercommitWarning(
      home,
      store.listActiveRuns().map((run) => run.dir),
    );
  } finally {
    store.close();
  }
}

/** Why contamination checks cannot run: they run under prlimit's limits, and without it not at all. */
function prlimitMissing(): string | undefined {
  const found = spawnSync('prlimit', ['--version'], { stdio: 'ignore' });
  return found.error || found.status !== 0
    ? "prlimit (util-linux) is not installed, so every run's contamination check is recorded incomplete; install util-linux"
    : undefined;
}

/**
 * The doctor's `limits` lines: the cgroup version and exactly what a job's cgroup enforces and measures (read off the
 * cgroup a server would manage, changing none), or FAILED and why; then a warning where each job start waits for the kernel.
 */
function limitsLines(): { lines: string[]; failed?: string } {
  const found = cgroupEnforcement();
  if ('reason' in found) {
    const failed = `${found.reason}: jobs run without memory, CPU and process limits, and compute is charged as wall time × all cores`;
    return { lines: [`FAILED: ${failed}`], failed };
  }
  const slow = slowCgroupMovesReason();
  return { lines: [`per job, ${found.enforces}`, ...(slow ? [`warning: ${slow}`] : [])] };
}

/** What `--require` can name: each sandbox backend, and what the doctor's other lines check. */
const requirementNames = [...sandboxNames, 'limits', 'gpu', 'kernel-storage', 'checks', 'node'] as const;
type Requirement = (typeof requirementNames)[number];
/** The oldest Node the CLI runs on (package.json's engines). */
const minimumNode = 20;

function parseRequirements(list: string | undefined): Requirement[] {
  const names = (list ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !(requirementNames as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw new A2rlError('INVALID_INPUT', `doctor --require knows no ${unknown.join(', ')}; name some of: ${requirementNames.join(', ')}.`);
  }
  return names as Requirement[];
}

/** The doctor's `disk` line: the home's free space, a warning when it runs low. */
function homeSpace(home: string): string {
  if (!existsSync(home)) return `the home ${home} does not exist yet (the first run makes it)`;
  const warning = lowSpaceWarning(home);
  return warning ? `warning: ${warning}` : `the home ${home} has ${(freeBytes(home) / 2 ** 30).toFixed(1)} GiB free`;
}
