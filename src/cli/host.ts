import { type Command, Option } from 'commander';
import Docker from 'dockerode';
import { buildImage, type ImageName, imageNames } from '../../sandbox/images/build.js';
import { sharedIdentityReason } from '../../sandbox/job-identity.js';
import { createBackend, sandboxNames } from '../../sandbox/registry.js';
import { imageOvercommitWarning, kernelStorageUnavailable } from '../../sandbox/run-storage.js';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';
import { gpuReport } from './doctor-gpu.js';
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
    .description('report which sandbox backends work on this host, and why the others do not; then its GPUs, if any')
    .addOption(
      new Option('--shared-root <dir>', 'slurm: the folder every node sees at the same path, as serve takes it').env('A2RL_SHARED_ROOT'),
    )
    .action(async (options: { sharedRoot?: string }) => {
      let usable = 0;
      // Backends that start jobs on this host, where the GPU lines run a sandboxed job on GPU 0 (Slurm's GPUs are its nodes').
      const local: Array<{ name: string; backend: SandboxBackend }> = [];
      for (const name of sandboxNames) {
        const backend = createBackend(name, `doctor-${process.pid}`, { slurm: { sharedRoot: options.sharedRoot } });
        const reason = await backend.unavailableReason();
        if (!reason) usable++;
        if (!reason && !backend.scheduler) local.push({ name, backend });
        const cluster =
          backend.scheduler &&
          `; up to ${backend.scheduler.maxGpusPerJob()} GPU(s) per job, compute measured by ${backend.scheduler.accounting}`;
        process.stdout.write(`${name}\t${reason ? `unavailable: ${reason}` : `works${cluster ?? ''}`}\n`);
      }
      const shortcoming = createBackend('bwrap', `doctor-${process.pid}`).hostCheck();
      process.stdout.write(`limits\t${shortcoming ?? 'per job (cgroup v1): memory, CPU, pids, CPU-seconds'}\n`);
      process.stdout.write(`disk\t${homeSpace(defaultHome())}\n`);
      const overcommit = liveImagesOvercommit(defaultHome());
      if (overcommit) process.stdout.write(`disk\twarning: ${overcommit}\n`);
      const noImages = kernelStorageUnavailable();
      process.stdout.write(
        `storage\t${noImages ? `disk quota by walk, not the kernel: ${noImages}` : "disk quota by the kernel: each run's workspace is an ext4 image of its own"}\n`,
      );
      process.stdout.write(`jobs\t${sharedIdentityReason() ?? "each run's jobs run as an unprivileged host uid of their own"}\n`);
      process.stdout.write(`checks\t${checkLimitsLine()}\n`);
      for (const line of await gpuReport(local)) process.stdout.write(`${line}\n`);
      if (usable === 0) process.exitCode = 1;
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
      await buildImage(new Docker(), name as ImageName, { force: options.force, log: (line) => process.stderr.write(`${line}\n`) });
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

/** The doctor's `checks` line: the contamination check runs under prlimit's limits, and without it cannot run at all. */
function checkLimitsLine(): string {
  const found = spawnSync('prlimit', ['--version'], { stdio: 'ignore' });
  return found.error || found.status !== 0
    ? "unavailable: prlimit (util-linux) is not installed, so every run's contamination check is recorded incomplete; install util-linux"
    : 'contamination checks run in a process of their own under prlimit (address space, CPU-seconds)';
}

/** The doctor's `disk` line: the home's free space, a warning when it runs low. */
function homeSpace(home: string): string {
  if (!existsSync(home)) return `the home ${home} does not exist yet (the first run makes it)`;
  const warning = lowSpaceWarning(home);
  return warning ? `warning: ${warning}` : `the home ${home} has ${(freeBytes(home) / 2 ** 30).toFixed(1)} GiB free`;
}
