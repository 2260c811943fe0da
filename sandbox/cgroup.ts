import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { processTree, signalAll } from './process-tree.js';
import { basename, dirname, join, resolve } from 'node:path';
import type { ResourceUsage } from './contract.js';

const controllers = ['memory', 'cpu', 'cpuacct', 'pids'] as const;
export type Controller = (typeof controllers)[number];
/** The cgroup v2 controllers a job's limits need (CPU time is in every v2 cgroup's cpu.stat). */
const v2Controllers = ['memory', 'cpu', 'pids'] as const;

/**
 * Where processes of a cgroup v2 folder that must hand it over go (the no-internal-process rule: a cgroup that
 * gives its children controllers holds no process itself): the server's own processes, and a Docker container's.
 */
export const leafNames = { server: 'a2rl-server', container: 'a2rl-init' } as const;

/** Checks, one event-loop turn apart, for a job's last processes to leave before waiting a millisecond and more. */
const quickChecks = 20;

/**
 * Where job cgroups are made: cgroup v1, one folder per controller; or cgroup v2, one folder of the unified
 * hierarchy (every controller maps to it) whose controllers are handed to its children.
 */
export interface CgroupBase {
  version: 1 | 2;
  dirs: Map<Controller, string>;
  /** v2: the folder is the hierarchy's root, which may hold processes and hand controllers down at once. */
  root?: boolean;
}

interface CgroupMount {
  fsType: 'cgroup' | 'cgroup2';
  mountPoint: string;
  /** The hierarchy's own options: its v1 controllers, favordynmods, nsdelegate… */
  options: string[];
}

/** The cgroup hierarchies a `/proc/self/mountinfo` lists (optional fields end at ' - '; spaces in paths are escaped). */
function cgroupMounts(mountinfo: string): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of mountinfo.trim().split('\n')) {
    const [mountFields, fsFields] = line.split(' - ');
    const [fsType, , superOptions] = fsFields?.split(' ') ?? [];
    const mountPoint = mountFields?.split(' ')[4];
    if ((fsType === 'cgroup' || fsType === 'cgroup2') && mountPoint) {
      mounts.push({ fsType, mountPoint, options: superOptions?.split(',') ?? [] });
    }
  }
  return mounts;
}

/** This process's `/proc/self/mountinfo`, or '' where there is none to read. */
function ownMountinfo(): string {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return '';
  }
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Where each cgroup v1 controller is mounted. */
function controllerMounts(mounts: CgroupMount[]): Map<Controller, string> | undefined {
  const found = new Map<Controller, string>();
  for (const mount of mounts.filter((m) => m.fsType === 'cgroup')) {
    for (const option of mount.options) {
      const controller = controllers.find((c) => c === option);
      if (controller && !found.has(controller)) found.set(controller, mount.mountPoint);
    }
  }
  return controllers.every((controller) => found.has(controller)) ? found : undefined;
}

/**
 * A process's cgroups, where job cgroups can be made under them: v1 when its four controllers are mounted (a hybrid
 * host's empty unified hierarchy aside), else v2. In v2 a folder named after a leaf ({@link leafNames}) stands for its
 * parent, which handed its processes over. A reason where neither works.
 */
function locate(pid: number | 'self'): CgroupBase | { reason: string } {
  const membership = readText(`/proc/${pid}/cgroup`);
  if (membership === undefined) return { reason: `process ${pid} is gone` };
  const mounts = cgroupMounts(ownMountinfo());
  const paths = new Map<string, string>();
  for (const line of membership.trim().split('\n')) {
    const [id, names, path] = line.split(':');
    if (id === '0' && names === '') paths.set('', path ?? '/');
    for (const name of names?.split(',') ?? []) if (name) paths.set(name, path ?? '/');
  }
  const v1 = controllerMounts(mounts);
  if (v1) {
    const dirs = new Map<Controller, string>();
    for (const [controller, mountPoint] of v1) {
      const dir = join(mountPoint, paths.get(controller) ?? '/');
      if (!writable(dir)) return { reason: `the cgroup v1 folder ${dir} is not writable (run the server as root)` };
      dirs.set(controller, dir);
    }
    return { version: 1, dirs };
  }
  const unified = mounts.find((mount) => mount.fsType === 'cgroup2');
  if (!unified) return { reason: 'neither cgroup v1 controllers (memory, cpu, cpuacct, pids) nor a cgroup v2 hierarchy are mounted' };
  let dir = join(unified.mountPoint, paths.get('') ?? '/');
  if ((Object.values(leafNames) as string[]).includes(basename(dir))) dir = dirname(dir);
  const available = (readText(join(dir, 'cgroup.controllers')) ?? '').trim().split(/\s+/);
  const missing = v2Controllers.filter((controller) => !available.includes(controller));
  if (missing.length > 0) {
    return {
      reason: `the cgroup v2 folder ${dir} was not given the ${missing.join(', ')} controller(s): ${delegationAdvice}`,
    };
  }
  if (![dir, join(dir, 'cgroup.procs'), join(dir, 'cgroup.subtree_control')].every(writable)) {
    return { reason: `the cgroup v2 folder ${dir} is not writable by this user: ${delegationAdvice}` };
  }
  return {
    version: 2,
    dirs: new Map(controllers.map((controller) => [controller, dir])),
    root: resolve(dir) === resolve(unified.mountPoint),
  };
}

/**
 * Why this process's cgroup v2 folder is not its server's to change, or undefined where it is: the hierarchy's root
 * (a VM's, a container's own cgroup namespace), a cgroup systemd delegated (`Delegate=yes` marks it with the xattr
 * `trusted.delegate`, or `user.delegate` under a user manager, since systemd 251), or one that holds no process but
 * this one and its descendants (made for it). Any other (an ssh session's scope, a service without `Delegate=yes`) is
 * systemd's: writability proves nothing for root, moving its other processes takes what is not ours, and systemd may
 * switch the controllers off again, and with them every job's memory.max and pids.max.
 */
function delegationRefusal(base: CgroupBase): string | undefined {
  if (base.version === 1 || base.root) return undefined;
  const dir = base.dirs.get('memory')!;
  if (delegatedBySystemd(dir)) return undefined;
  const ours = new Set(processTree(process.pid));
  const foreign = [dir, join(dir, leafNames.server)]
    .flatMap((folder) => (readText(join(folder, 'cgroup.procs')) ?? '').split('\n').filter(Boolean).map(Number))
    .filter((pid) => !ours.has(pid));
  if (foreign.length === 0) return undefined;
  const named = foreign
    .slice(0, 3)
    .map((pid) => `${pid} ${(readText(`/proc/${pid}/comm`) ?? '?').trim()}`)
    .join(', ');
  return (
    `the cgroup v2 folder ${dir} is not delegated to this server: it holds processes that are not the server's ` +
    `(${named}${foreign.length > 3 ? ', …' : ''}) and systemd marked it with no Delegate=yes (trusted.delegate or user.delegate)`
  );
}

/** Whether systemd delegated the cgroup folder (its `trusted.delegate` or `user.delegate` xattr; Node reads no xattrs). */
function delegatedBySystemd(dir: string): boolean {
  const read = spawnSync('/usr/bin/python3', ['-S', '-c', 'import os, sys\nfor name in os.listxattr(sys.argv[1]): print(name)', dir], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  return read.status === 0 && /^(trusted|user)\.delegate$/m.test(read.stdout);
}

/** How an operator gives the server a cgroup v2 subtree of its own (docs/operating.md, "Hosts"). */
const delegationAdvice =
  'run the server as a systemd service with Delegate=yes, or under systemd-run --scope -p Delegate=yes (add --user when not root)';

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The cgroups of a process where job cgroups can be made under them (a Docker container's), or undefined. */
export function cgroupBaseOf(pid: number | 'self'): CgroupBase | undefined {
  const found = locate(pid);
  return 'reason' in found ? undefined : found;
}

/** How long {@link delegateControllers} tries again while the kernel still sees a moved process in the folder. */
const delegateRetryMs = 1000;

/**
 * Hands a cgroup v2 folder's memory, cpu and pids controllers to its children. The kernel refuses while the folder
 * itself holds processes (EBUSY; the root cgroup excepted): they move into the leaf `leaf` first, those forked
 * meanwhile too, and the write is retried (the kernel may still see a moved process for a moment).
 */
export function delegateControllers(dir: string, leaf: string): void {
  const enable = () => writeFileSync(join(dir, 'cgroup.subtree_control'), v2Controllers.map((c) => `+${c}`).join(' '));
  const enabled = (readText(join(dir, 'cgroup.subtree_control')) ?? '').trim().split(/\s+/);
  if (v2Controllers.every((controller) => enabled.includes(controller))) return;
  // Synchronous (a job's cgroup is made as it starts): the waits between tries block, so they are short and bounded.
  const deadline = Date.now() + delegateRetryMs;
  for (let attempt = 0, waitMs = 1; ; attempt++) {
    try {
      enable();
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || Date.now() >= deadline) {
        throw new Error(`cannot give the controllers of ${dir} to its children: ${(error as Error).message}`, { cause: error });
      }
    }
    if (attempt > 0) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, waitMs);
      waitMs = Math.min(2 * waitMs, 50);
    }
    mkdirSync(join(dir, leaf), { recursive: true });
    for (const pid of (readText(join(dir, 'cgroup.procs')) ?? '').split('\n').filter(Boolean)) {
      try {
        writeFileSync(join(dir, leaf, 'cgroup.procs'), pid);
      } catch {
        // Exited meanwhile.
      }
    }
  }
}

/**
 * Where this process's job cgroups go, so they nest under ours and inherit whatever limits the host already puts on
 * us. In v2 the server's own cgroup is the delegated subtree: its controllers go to its children, and the server
 * moves into the leaf `a2rl-server` to allow that.
 */
function discoverHierarchies(): CgroupBase | { reason: string } {
  const found = ownHierarchies();
  if ('reason' in found || found.version === 1) return found;
  const dir = found.dirs.get('memory')!;
  try {
    delegateControllers(dir, leafNames.server);
  } catch (error) {
    return { reason: `${(error as Error).message}: ${delegationAdvice}` };
  }
  return found;
}

/** This process's cgroups where they are its server's to change (`delegationRefusal`), changing nothing. */
function ownHierarchies(): CgroupBase | { reason: string } {
  const found = locate('self');
  if ('reason' in found) return found;
  const refusal = delegationRefusal(found);
  return refusal ? { reason: `${refusal}: ${delegationAdvice}` } : found;
}

let hierarchies: CgroupBase | { reason: string } | null = null;

function writableHierarchies(): CgroupBase | undefined {
  if (hierarchies === null) hierarchies = discoverHierarchies();
  return 'reason' in hierarchies ? undefined : hierarchies;
}

export function cgroupsUnavailableReason(): string | undefined {
  writableHierarchies();
  return hierarchies && 'reason' in hierarchies ? `no per-job cgroups: ${hierarchies.reason}` : undefined;
}

/**
 * What per-job cgroups would enforce and measure on this host, or why there are none (`a2rl doctor`). Read without
 * changing any cgroup: no process moves and no controller is enabled, which only a server does (`discoverHierarchies`).
 */
export function cgroupEnforcement(): { enforces: string } | { reason: string } {
  const base = hierarchies ?? ownHierarchies();
  if ('reason' in base) return { reason: `no per-job cgroups: ${base.reason}` };
  if (base.version === 1) {
    const dirs = [...new Set(base.dirs.values())].map((dir) => dir.replace(/(.)\/$/, '$1'));
    return {
      enforces: `cgroup v1 (${dirs.join(', ')}): memory.limit_in_bytes, cpu.cfs_quota_us, pids.max; CPU-seconds from cpuacct.usage, peak memory from memory.max_usage_in_bytes, OOM kills from memory.oom_control`,
    };
  }
  const dir = base.dirs.get('memory')!;
  // A cgroup given the memory controller shows the files a job's would (the root shows none: a child of it, where one has them).
  const sample = [dir, ...listDirs(dir).map((child) => join(dir, child))].find((folder) => existsSync(join(folder, 'memory.max')));
  const has = (file: string) => sample !== undefined && existsSync(join(sample, file));
  const swap = has('memory.swap.max') ? 'memory.max + memory.swap.max (no swap)' : 'memory.max (no swap accounting in this kernel)';
  const peak = has('memory.peak') ? 'memory.peak' : 'memory.current sampled each second (no memory.peak before Linux 5.19)';
  return {
    enforces: `cgroup v2 (under ${join(dir, 'a2rl')}): ${swap}, cpu.max, pids.max; CPU-seconds from cpu.stat, peak memory from ${peak}, OOM kills from memory.events`,
  };
}

/**
 * Why moving a job into its cgroups waits for the kernel, read from a `/proc/self/mountinfo`;
 * undefined when no cgroup hierarchy is mounted or one has `favordynmods`. Each move takes the
 * kernel's thread-group lock for writing, which after a quiet spell first waits for an RCU grace
 * period: on the 2-core bench host 4–14 ms (p50) for a job started 30–100 ms after the last,
 * against 0.03 ms. `favordynmods` (a cgroup2 mount option since Linux 6.0, a boot option since
 * 6.7; on any hierarchy it holds for all) keeps the lock ready for writers, at a small cost to
 * every fork and exit. A remount sets every cgroup2 option at once, so the advice repeats them.
 */
export function slowCgroupMovesReason(mountinfo = ownMountinfo()): string | undefined {
  const mounts = cgroupMounts(mountinfo);
  if (mounts.length === 0 || mounts.some((mount) => mount.options.includes('favordynmods'))) return undefined;
  const unified = mounts.find((mount) => mount.fsType === 'cgroup2');
  // cgroup v1 hierarchies take it only when mounted, not on a remount.
  const remedy = unified
    ? `as root, mount -o remount,${[...unified.options, 'favordynmods'].join(',')} ${unified.mountPoint} ` +
      '(Linux 6.0 or later; until reboot), or boot with cgroup_favordynmods=true (Linux 6.7 or later)'
    : 'boot with cgroup_favordynmods=true (Linux 6.7 or later)';
  return `per-job limits apply, but each job start first waits for an RCU grace period as the job moves into its cgroups (4–14 ms p50 after a quiet spell on a 2-core host): ${remedy}`;
}

/** A job's cgroup, in each v1 controller or its one v2 folder: limits, accounting, and the list of its processes. */
export class JobCgroup {
  /** The most memory seen, where the kernel keeps no peak of its own (v2 before Linux 5.19's memory.peak). */
  private sampledPeak = 0;

  private constructor(
    private readonly version: 1 | 2,
    private readonly dirs: Map<Controller, string>,
  ) {}

  /** Creates `a2rl/<group>/<tag>` under this process's cgroups, or undefined where that is impossible. */
  static create(group: string, tag: string): JobCgroup | undefined {
    const base = writableHierarchies();
    if (!base) return undefined;
    return JobCgroup.createIn(base, join('a2rl', group, tag));
  }

  /**
   * Creates `relativePath` under the given cgroups (e.g. a container's), one folder per v1 controller; in v2 each
   * folder on the way hands its controllers down (the base's own processes move to `leaf` when it holds any).
   */
  static createIn(base: CgroupBase, relativePath: string, leaf: string = leafNames.server): JobCgroup {
    const dirs = new Map<Controller, string>();
    if (base.version === 2) {
      let dir = base.dirs.get('memory')!;
      delegateControllers(dir, leaf);
      const parts = relativePath.split('/');
      for (const [index, part] of parts.entries()) {
        dir = join(dir, part);
        mkdirSync(dir, { recursive: true });
        // Folders on the way hold no process: the write cannot meet the no-internal-process rule.
        if (index < parts.length - 1) delegateControllers(dir, leaf);
      }
      for (const controller of controllers) dirs.set(controller, dir);
      return new JobCgroup(2, dirs);
    }
    for (const [controller, parent] of base.dirs) {
      const dir = join(parent, relativePath);
      mkdirSync(dir, { recursive: true });
      dirs.set(controller, dir);
    }
    return new JobCgroup(1, dirs);
  }

  /** The folder of one controller (in v2, the job's one folder). */
  dir(controller: Controller): string {
    return this.dirs.get(controller)!;
  }

  /** The files a process writes its pid into to join this cgroup. */
  get procsFiles(): string[] {
    // cpu and cpuacct may share one hierarchy, and v2 has one folder: joining each once is enough.
    return [...new Set([...this.dirs.values()])].map((dir) => join(dir, 'cgroup.procs'));
  }

  /** Moves a process (not its existing children) into this cgroup; the pids controller last, which a waiting job watches for. */
  join(pid: number): void {
    const pidsDir = this.dirs.get('pids')!;
    const dirs = [...new Set(this.dirs.values())].sort((a, b) => Number(a === pidsDir) - Number(b === pidsDir));
    for (const dir of dirs) writeFileSync(join(dir, 'cgroup.procs'), String(pid));
  }

  setLimits(limits: { cpus: number; memoryBytes: number; pids: number }): void {
    const period = 100_000;
    const quota = Math.round(limits.cpus * period);
    if (this.version === 2) {
      this.write('cpu', 'cpu.max', `${quota} ${period}`);
      this.write('memory', 'memory.max', limits.memoryBytes);
      // Swap would let a job hold more than its memory, slowly, charged nowhere; absent without swap accounting.
      if (existsSync(join(this.dir('memory'), 'memory.swap.max'))) this.write('memory', 'memory.swap.max', 0);
      this.write('pids', 'pids.max', limits.pids);
      return;
    }
    this.write('cpu', 'cpu.cfs_period_us', period);
    this.write('cpu', 'cpu.cfs_quota_us', quota);
    this.write('memory', 'memory.limit_in_bytes', limits.memoryBytes);
    this.write('pids', 'pids.max', limits.pids);
  }

  /** What the job has used so far: CPU time, current and peak memory. */
  usage(): ResourceUsage {
    const memoryBytes = this.memoryBytes();
    return { cpuSeconds: this.cpuSeconds(), peakMemoryBytes: this.peakMemoryBytes(), memoryBytes, measured: true };
  }

  cpuSeconds(): number {
    if (this.version === 2) {
      const match = /^usage_usec (\d+)$/m.exec(this.read('cpu', 'cpu.stat') ?? '');
      return match ? Number(match[1]) / 1e6 : 0;
    }
    return Number(this.read('cpuacct', 'cpuacct.usage') ?? 0) / 1e9;
  }

  peakMemoryBytes(): number {
    if (this.version === 2) {
      const peak = this.read('memory', 'memory.peak');
      return peak === undefined ? Math.max(this.sampledPeak, this.memoryBytes()) : Number(peak);
    }
    return Number(this.read('memory', 'memory.max_usage_in_bytes') ?? 0);
  }

  memoryBytes(): number {
    const current = Number(this.read('memory', this.version === 2 ? 'memory.current' : 'memory.usage_in_bytes') ?? 0);
    this.sampledPeak = Math.max(this.sampledPeak, current);
    return current;
  }

  oomKills(): number {
    const match = /^oom_kill (\d+)$/m.exec(this.read('memory', this.version === 2 ? 'memory.events' : 'memory.oom_control') ?? '');
    return match ? Number(match[1]) : 0;
  }

  pids(): number[] {
    const text = this.read('pids', 'cgroup.procs') ?? '';
    return text.split('\n').filter(Boolean).map(Number);
  }

  /** Removes the cgroup directories; succeeds only once no process is left in them. */
  remove(): void {
    for (const dir of new Set(this.dirs.values())) {
      if (existsSync(dir)) tryRmdir(dir);
    }
  }

  /**
   * Kills every process left in the cgroup and waits (up to about 2 s) until none is listed.
   * The sandbox's own processes are usually still leaving as the job's exit is seen (the
   * namespace's init tears its mounts down), for well under a millisecond: the first checks
   * come at once, the later ones after a millisecond, doubling, not a fixed wait per job.
   * v2's `cgroup.kill` (Linux 5.14+) kills what forks meanwhile too.
   */
  async killAll(): Promise<void> {
    const started = performance.now();
    const killFile = this.version === 2 ? join(this.dir('pids'), 'cgroup.kill') : undefined;
    for (let check = 0, waitMs = 1; this.pids().length > 0 && performance.now() - started < 2000; check++) {
      if (killFile && existsSync(killFile)) writeFileSync(killFile, '1');
      else signalAll(this.pids(), 'SIGKILL');
      if (check < quickChecks) {
        await new Promise((resolve) => setImmediate(resolve));
      } else {
        await new Promise((resolve) => setTimeout(resolve, waitMs));
        waitMs = Math.min(2 * waitMs, 100);
      }
    }
  }

  /** {@link killAll}, then the cgroup's removal. */
  async killAndRemove(): Promise<void> {
    await this.killAll();
    this.remove();
  }

  /** Removes a server's (empty) group folder when it shuts down. */
  static removeGroup(group: string): void {
    // Only where this process made its cgroups: a backend that ran no job (the doctor's) must not move processes to remove nothing.
    if (!hierarchies || 'reason' in hierarchies) return;
    for (const base of new Set(hierarchies.dirs.values())) tryRmdir(join(base, 'a2rl', group));
  }

  private read(controller: Controller, file: string): string | undefined {
    return readText(join(this.dirs.get(controller)!, file));
  }

  private write(controller: Controller, file: string, value: number | string): void {
    writeFileSync(join(this.dirs.get(controller)!, file), String(value));
  }
}

/**
 * After a crash: kills whatever a dead server left in its job cgroups and removes them.
 * Groups are named after their owning server, so a live server's jobs are left alone.
 */
export function sweepCgroups(ownerAlive: (group: string) => boolean): string[] {
  const bases = writableHierarchies();
  if (!bases) return [];
  const swept = new Set<string>();
  for (const base of new Set(bases.dirs.values())) {
    const root = join(base, 'a2rl');
    for (const group of listDirs(root)) {
      if (ownerAlive(group)) continue;
      for (const tag of listDirs(join(root, group))) {
        try {
          signalAll(
            readFileSync(join(root, group, tag, 'cgroup.procs'), 'utf8')
              .split('\n')
              .filter(Boolean)
              .map(Number),
            'SIGKILL',
          );
        } catch {
          // Gone meanwhile.
        }
        tryRmdir(join(root, group, tag));
        swept.add(`${group}/${tag}`);
      }
      tryRmdir(join(root, group));
    }
  }
  return [...swept];
}

/** Kills the processes of the cgroups named `prefix*` under the given folders (a dead server's job cgroups) and removes them. */
export function sweepChildCgroups(parents: CgroupBase, prefix: string): void {
  for (const parent of new Set(parents.dirs.values())) {
    for (const child of listDirs(parent).filter((name) => name.startsWith(prefix))) {
      try {
        signalAll(
          readFileSync(join(parent, child, 'cgroup.procs'), 'utf8')
            .split('\n')
            .filter(Boolean)
            .map(Number),
          'SIGKILL',
        );
      } catch {
        // Gone meanwhile.
      }
      tryRmdir(join(parent, child));
    }
  }
}

function listDirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
  } catch {
    return [];
  }
}

function tryRmdir(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Processes still exiting: the next start retries.
  }
}
