import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, posix } from 'node:path';
import { A2rlError } from '../src/util/errors.js';
import { cgroupsUnavailableReason, JobCgroup, slowCgroupMovesReason, sweepCgroups } from './cgroup.js';
import { gpuDeviceArgs, hostGpuDevices } from './gpu-devices.js';
import { giveWritableMounts, type JobIdentity, jobIdentity } from './job-identity.js';
import { processTree, signalAll } from './process-tree.js';
import type { ExecOptions, ExitStatus, ResourceUsage, SandboxBackend, SandboxInstance, SandboxProcess, SandboxSpec } from './contract.js';

/** The uid jobs of a server that is not root see inside their user namespace (it maps to the server's own). */
const sandboxUid = 1000;
/** Operating-system files a Python/PyTorch job needs, always read-only (not ld.so.conf: only ldconfig reads it, to rebuild the cache). */
const systemFiles = ['/etc/alternatives', '/etc/ld.so.cache', '/etc/localtime'];
const mergedUsrLinks = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * setpriv, found once at startup in the system folders every sandbox binds read-only: never through PATH, which
 * is the job's environment while setpriv still holds CAP_SETUID/SETGID/DAC_OVERRIDE. Undefined when not installed.
 */
export const setprivPath: string | undefined = ['/usr/bin/setpriv', '/usr/sbin/setpriv', '/bin/setpriv', '/sbin/setpriv'].find((path) =>
  existsSync(path),
);

/** Why a root server cannot drop its jobs to their own uid, for the backends' availability checks and `a2rl doctor`. */
export function setprivMissingReason(): string | undefined {
  if (process.getuid?.() !== 0 || setprivPath) return undefined;
  return 'setpriv is not installed in /usr/bin, /usr/sbin, /bin or /sbin, and a server running as root needs it to drop each job to its own uid; install the Debian package util-linux (or run the server as a user that is not root)';
}

/**
 * Bubblewrap: a fresh set of namespaces per job (no network, own pids, own mounts), the
 * job in a cgroup of its own for limits and CPU accounting where cgroups are writable (v1, or a v2 subtree).
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
    return setprivMissingReason();
  }

  async create(spec: SandboxSpec): Promise<SandboxInstance> {
    await giveWritableMounts(spec);
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
  gpuDevices: { count: number; args: string[] } = {
    count: options.limits.gpus.length,
    args: gpuDeviceArgs(options.limits.gpus, options.limits.gpus.length > 0 ? hostGpuDevices() : []),
  },
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
    // The job's GPUs are numbered as nvidia-smi numbers them, by PCI bus id (sandbox/gpu-devices.ts).
    ...(gpuDevices.count > 0 ? { CUDA_DEVICE_ORDER: 'PCI_BUS_ID' } : {}),
  };
  const identity = jobIdentity(spec.name);
  const args = [
    ...(identity ? asRoot : asUser),
    '--die-with-parent',
    '--new-session',
    '--hostname',
    'a2rl-sandbox',
    '--clearenv',
    ...Object.entries(env).flatMap(([key, value]) => ['--setenv', key, value]),
    // As root, bwrap makes the folders above a mount point 0700: made first, on the sandbox's own root, so the job's
    // uid can reach its mounts (every bind comes after, so none of these lands in a host folder).
    ...(identity ? mountParents(spec).flatMap((dir) => ['--perms', '0755', '--dir', dir]) : []),
    ...systemArgs(),
    '--proc',
    '/proc',
    // Host-global kernel settings: read-only whatever the job's uid (bwrap leaves /proc/sys writable). No /sys at all.
    '--ro-bind',
    '/proc/sys',
    '/proc/sys',
    '--dev',
    '/dev',
    // Bwrap makes these as the uid it runs as: writable by everyone (sticky), so the job's uid can use them.
    '--perms',
    '1777',
    '--tmpfs',
    '/tmp',
    '--perms',
    '1777',
    '--tmpfs',
    '/dev/shm',
  ];
  for (const hidden of spec.hidden) {
    if (existsSync(hidden) && (hidden.startsWith('/usr/') || hidden.startsWith('/etc/'))) args.push('--tmpfs', hidden);
  }
  args.push(...gpuDevices.args);
  const mounts = [...spec.mounts].sort((a, b) => a.target.split('/').length - b.target.split('/').length);
  for (const mount of mounts) args.push(mount.readOnly ? '--ro-bind' : '--bind', mount.source, mount.target);
  // The root is bwrap's own tmpfs: made read-only, only the writable mounts and /tmp take writes.
  args.push('--remount-ro', '/', '--chdir', spec.workdir, '--');
  // As root, bwrap sets the sandbox up and the job's first process drops to the run's own uid:
  // no capabilities left, none to gain (bwrap sets no_new_privs), nothing inherited.
  if (identity) args.push(...dropTo(identity));
  args.push(...options.command);
  return args;
}

/** The command prefix that drops a root bwrap's first process to `identity`: every capability and group gone. */
export function dropTo(identity: JobIdentity): string[] {
  const missing = setprivMissingReason();
  if (missing) throw new A2rlError('SANDBOX_UNAVAILABLE', `This sandbox cannot start: ${missing}.`);
  return [setprivPath!, `--reuid=${identity.uid}`, `--regid=${identity.gid}`, '--clear-groups', '--inh-caps=-all', '--'];
}

/** The folders above the sandbox's mount points, the system files and its working folder, outermost first; none inside a system mount. */
function mountParents(spec: SandboxSpec): string[] {
  return parentFolders([...spec.mounts.map((mount) => mount.target), ...systemFiles, spec.workdir]);
}

/**
 * The folders above these mount points, outermost first, none inside a system mount: what a root bwrap must make
 * itself (`--perms 0755 --dir`), since the parents it makes on its own are 0700, closed to an unprivileged uid.
 * `inTmp`: those inside `/tmp` too, for a sandbox that binds host folders there (made after its tmpfs on `/tmp`).
 */
export function parentFolders(paths: string[], inTmp = false): string[] {
  const parents = new Set<string>();
  for (const path of paths) {
    for (let dir = posix.dirname(path); dir !== '/'; dir = posix.dirname(dir)) parents.add(dir);
  }
  const system = ['/usr', '/proc', '/dev', ...(inTmp ? [] : ['/tmp']), ...mergedUsrLinks];
  return [...parents]
    .filter((dir) => !system.some((top) => dir === top || dir.startsWith(`${top}/`)))
    .sort((a, b) => a.split('/').length - b.split('/').length);
}

/**
 * Namespaces for a server that is root: no user namespace, which would map the job's uid to root's.
 * The capabilities kept are lost when setpriv switches to the job's uid (the kernel clears them on leaving uid 0).
 */
export const asRoot = [
  '--unshare-ipc',
  '--unshare-pid',
  '--unshare-net',
  '--unshare-uts',
  '--unshare-cgroup-try',
  '--cap-drop',
  'ALL',
  '--cap-add',
  'CAP_SETUID',
  '--cap-add',
  'CAP_SETGID',
  // Only to enter the working folder, which the job's uid owns and may have closed (chmod 700), before setpriv.
  '--cap-add',
  'CAP_DAC_OVERRIDE',
];
/** Namespaces for a server that is not root: a user namespace, in which the job's uid maps to the server's own. */
const asUser = ['--unshare-all', '--cap-drop', 'ALL', '--uid', String(sandboxUid), '--gid', String(sandboxUid)];

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
    // A job stopped as it starts (an exec cancelled at once) may have no process of its own yet, bwrap still setting
    // up: those that appear during the grace get TERM too, so the command never runs on past its stop.
    const termed = new Set<number>();
    const terminateNew = () => {
      const fresh = ownProcesses().filter((pid) => !termed.has(pid));
      for (const pid of fresh) termed.add(pid);
      signalAll(fresh, 'SIGTERM');
    };
    terminateNew();
    const sweep = setInterval(terminateNew, 100);
    try {
      if ((await this.exitWithin(graceMs)) === 'exited') return this.exited;
    } finally {
      clearInterval(sweep);
    }
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
