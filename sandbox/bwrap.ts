import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { cgroupsUnavailableReason, JobCgroup, slowCgroupMovesReason, sweepCgroups } from './cgroup.js';
import { processTree, signalAll } from './process-tree.js';
import type { ExecOptions, ExitStatus, ResourceUsage, SandboxBackend, SandboxInstance, SandboxProcess, SandboxSpec } from './contract.js';

/** The unprivileged identity jobs run as inside the sandbox. */
const sandboxUid = 1000;
/** Operating-system files a Python/PyTorch job needs, always read-only (not ld.so.conf: only ldconfig reads it, to rebuild the cache). */
const systemFiles = ['/etc/alternatives', '/etc/ld.so.cache', '/etc/localtime'];
const mergedUsrLinks = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * Bubblewrap: a fresh set of namespaces per job (no network, own pids, own mounts), the
 * job in a cgroup of its own for limits and CPU accounting where cgroup v1 is writable.
 */
export class BubblewrapBackend implements SandboxBackend {
  readonly name = 'bwrap';

  /** @param group names this server's cgroups, so a later start can sweep what a crash left. */
  constructor(
    private readonly group: string,
    private readonly bwrapPath = 'bwrap',
  ) {}

  async unavailableReason(): Promise<string | undefined> {
    const probe = spawnSync(this.bwrapPath, ['--unshare-all', ...systemArgs(), '--', '/bin/true'], { encoding: 'utf8' });
    if (probe.error) return `bubblewrap is not installed (${probe.error.message}); install the Debian package bubblewrap`;
    if (probe.status !== 0) return `bubblewrap cannot create namespaces here: ${probe.stderr.trim()}`;
    return undefined;
  }

  async create(spec: SandboxSpec): Promise<SandboxInstance> {
    return new BubblewrapInstance(spec, this.group, this.bwrapPath);
  }

  hostCheck(): string | undefined {
    const noCgroups = cgroupsUnavailableReason();
    if (noCgroups) return `${noCgroups}: jobs run without memory, CPU and process limits, and compute is charged as wall time × all cores`;
    return slowCgroupMovesReason();
  }

  async sweep(ownerAlive: (owner: string) => boolean): Promise<string[]> {
    return sweepCgroups(ownerAlive);
  }

  async dispose(): Promise<void> {
    JobCgroup.removeGroup(this.group);
  }
}

/** Read-only binds of the operating system's files (`/usr`, the merged-usr links, a few `/etc` files) for a bwrap command line. */
export function systemArgs(): string[] {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const link of mergedUsrLinks) {
    if (!existsSync(link)) continue;
    if (lstatSync(link).isSymbolicLink()) args.push('--symlink', `usr${link}`, link);
    else args.push('--ro-bind', link, link);
  }
  for (const file of systemFiles) args.push('--ro-bind-try', file, file);
  return args;
}

class BubblewrapInstance implements SandboxInstance {
  private readonly running = new Set<BubblewrapProcess>();

  constructor(
    readonly spec: SandboxSpec,
    private readonly group: string,
    private readonly bwrapPath: string,
  ) {}

  exec(options: ExecOptions): SandboxProcess {
    const cgroup = JobCgroup.create(this.group, options.tag);
    try {
      cgroup?.setLimits(options.limits);
    } catch (error) {
      cgroup?.remove();
      throw error;
    }
    // The shell joins the job's cgroups before it becomes bwrap, so nothing escapes accounting.
    // A log takes stderr on the same pipe as stdout, so the two stay in the order they came.
    const toLog = !('captureBytes' in options.output);
    const joinThenRun = 'for f in $A2RL_CGROUP_PROCS; do echo $$ > "$f" || exit 125; done; exec "$@"';
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(
        '/bin/sh',
        ['-c', toLog ? `exec 2>&1; ${joinThenRun}` : joinThenRun, 'sh', this.bwrapPath, ...bubblewrapArgs(this.spec, options)],
        {
          stdio: ['ignore', 'pipe', 'ignore'],
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', A2RL_CGROUP_PROCS: cgroup?.procsFiles.join(' ') ?? '' },
          detached: true,
        },
      );
    } catch (error) {
      // Arguments no process can take (a NUL byte): nothing started, so the cgroup goes too.
      cgroup?.remove();
      throw error;
    }
    const job = new BubblewrapProcess(child, cgroup, options.output);
    this.running.add(job);
    void job.exited.then(() => this.running.delete(job));
    return job;
  }

  async destroy(): Promise<void> {
    await Promise.all([...this.running].map((job) => job.stop(2000)));
  }
}

/**
 * bwrap's arguments for one job of a sandbox: fresh namespaces, no network, the system files
 * and the sandbox's mounts, then the job's command. Other backends that start this sandbox
 * elsewhere (Slurm, on a node) use it too; `gpuDevices` replaces the device arguments of
 * `limits.gpus` where only the node knows which devices the job got.
 */
export function bubblewrapArgs(
  spec: SandboxSpec,
  options: Pick<ExecOptions, 'command' | 'limits' | 'env'>,
  gpuDevices: { count: number; args: string[] } = { count: options.limits.gpus.length, args: gpuDeviceArgs(options.limits.gpus) },
): string[] {
  const threads = String(Math.max(1, Math.ceil(options.limits.cpus)));
  const env: Record<string, string> = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: spec.workdir,
    LANG: 'C.UTF-8',
    // Without /sys the BLAS and OpenMP runtimes see one core; tell them what the job got.
    OMP_NUM_THREADS: threads,
    OPENBLAS_NUM_THREADS: threads,
    MKL_NUM_THREADS: threads,
    ...spec.env,
    ...options.env,
    CUDA_VISIBLE_DEVICES: Array.from({ length: gpuDevices.count }, (_, i) => i).join(','),
  };
  const args = [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--uid',
    String(sandboxUid),
    '--gid',
    String(sandboxUid),
    '--hostname',
    'a2rl-sandbox',
    '--clearenv',
    ...Object.entries(env).flatMap(([key, value]) => ['--setenv', key, value]),
    ...systemArgs(),
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
  ];
  for (const hidden of spec.hidden) {
    if (existsSync(hidden) && (hidden.startsWith('/usr/') || hidden.startsWith('/etc/'))) args.push('--tmpfs', hidden);
  }
  args.push(...gpuDevices.args);
  const mounts = [...spec.mounts].sort((a, b) => a.target.split('/').length - b.target.split('/').length);
  for (const mount of mounts) args.push(mount.readOnly ? '--ro-bind' : '--bind', mount.source, mount.target);
  // The root is bwrap's own tmpfs: made read-only, only the writable mounts and /tmp take writes.
  args.push('--remount-ro', '/', '--chdir', spec.workdir, '--', ...options.command);
  return args;
}

/** The device arguments that give a job the host's GPUs of these indices. */
function gpuDeviceArgs(gpus: number[]): string[] {
  const args: string[] = [];
  for (const gpu of gpus) args.push('--dev-bind', `/dev/nvidia${gpu}`, `/dev/nvidia${gpu}`);
  if (gpus.length > 0) {
    for (const device of ['nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools']) args.push('--dev-bind-try', `/dev/${device}`, `/dev/${device}`);
  }
  return args;
}

class BubblewrapProcess implements SandboxProcess {
  readonly exited: Promise<ExitStatus>;
  private readonly startedAt = Date.now();
  private finalUsage: ResourceUsage | undefined;
  private readonly capturedChunks: Buffer[] = [];
  private capturedBytes = 0;

  constructor(
    private readonly child: ReturnType<typeof spawn>,
    private readonly cgroup: JobCgroup | undefined,
    output: ExecOptions['output'],
  ) {
    // Keep draining past the limit, so a chatty process never blocks on a full pipe.
    child.stdout?.on('data', (chunk: Buffer) => {
      if (!('captureBytes' in output)) output.write(chunk);
      else if (this.capturedBytes < output.captureBytes) {
        this.capturedChunks.push(chunk.subarray(0, output.captureBytes - this.capturedBytes));
        this.capturedBytes += chunk.length;
      }
    });
    this.exited = new Promise((resolve) => {
      const finish = async (exitCode: number | null, signal: string | null) => {
        const oomKilled = (this.cgroup?.oomKills() ?? 0) > 0;
        this.finalUsage = this.usage();
        // Whatever the job left behind dies with it; the empty cgroup goes after the answer.
        await this.cgroup?.killAll();
        resolve({ exitCode, signal, oomKilled });
        this.cgroup?.remove();
      };
      // 'close', not 'exit': captured output is complete only once the pipes have closed.
      child.once('close', (code, signal) => void finish(code, signal));
      child.once('error', () => void finish(null, null));
    });
  }

  captured(): string {
    return Buffer.concat(this.capturedChunks).toString('utf8');
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  usage(): ResourceUsage {
    if (this.finalUsage) return this.finalUsage;
    if (this.cgroup) return this.cgroup.usage();
    // No per-job accounting or CPU limit on this host: the job may have used every core, so charge them all.
    return { cpuSeconds: ((Date.now() - this.startedAt) / 1000) * availableParallelism(), peakMemoryBytes: 0, measured: false };
  }

  async stop(graceMs: number): Promise<ExitStatus> {
    if (this.finalUsage) return this.exited;
    // Signals go to the job's own processes first: bwrap then exits by itself and reports
    // the job's status. Killing bwrap first would tear the sandbox down without a word.
    const ownProcesses = () => this.jobPids().filter((pid) => !isBubblewrap(pid));
    signalAll(ownProcesses(), 'SIGTERM');
    if ((await this.exitWithin(graceMs)) === 'exited') return this.exited;
    signalAll(ownProcesses(), 'SIGKILL');
    if ((await this.exitWithin(1000)) === 'exited') return this.exited;
    signalAll(this.jobPids(), 'SIGKILL');
    return this.exited;
  }

  private exitWithin(ms: number): Promise<'exited' | 'timeout'> {
    const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms).unref());
    return Promise.race([this.exited.then(() => 'exited' as const), timer]);
  }

  private jobPids(): number[] {
    const pids = new Set(this.child.pid ? processTree(this.child.pid) : []);
    for (const pid of this.cgroup?.pids() ?? []) pids.add(pid);
    return [...pids];
  }
}

/** Whether a process is bubblewrap itself: signals meant for what it jails go past it (TERM would tear the jail down at once). */
export function isBubblewrap(pid: number): boolean {
  try {
    return readFileSync(join('/proc', String(pid), 'comm'), 'utf8').trim() === 'bwrap';
  } catch {
    return false;
  }
}
