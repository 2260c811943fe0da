import { type Command, Option } from 'commander';
import Docker from 'dockerode';
import { buildImage, type ImageName, imageNames } from '../../sandbox/images/build.js';
import { createBackend, sandboxNames } from '../../sandbox/registry.js';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';
import { gpuReport } from './doctor-gpu.js';

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
