import { accessSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { signalAll } from './process-tree.js';
import { join } from 'node:path';
import type { ResourceUsage } from './contract.js';

const controllers = ['memory', 'cpu', 'cpuacct', 'pids'] as const;
export type Controller = (typeof controllers)[number];

/** Checks, one event-loop turn apart, for a job's last processes to leave before waiting a millisecond and more. */
const quickChecks = 20;

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

/** Where each cgroup v1 controller is mounted. */
function controllerMounts(): Map<Controller, string> | undefined {
  const mountinfo = ownMountinfo();
  const found = new Map<Controller, string>();
  for (const mount of cgroupMounts(mountinfo).filter((m) => m.fsType === 'cgroup')) {
    for (const option of mount.options) {
      const controller = controllers.find((c) => c === option);
      if (controller && !found.has(controller)) found.set(controller, mount.mountPoint);
    }
  }
  return controllers.every((controller) => found.has(controller)) ? found : undefined;
}

/** The cgroup folder of a process in each controller, or undefined where one is missing or not writable. */
export function cgroupDirsOf(pid: number | 'self'): Map<Controller, string> | undefined {
  const mounts = controllerMounts();
  let membership: string;
  try {
    membership = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return undefined;
  }
  if (!mounts) return undefined;
  const paths = new Map<string, string>();
  for (const line of membership.trim().split('\n')) {
    const [, names, path] = line.split(':');
    for (const name of names?.split(',') ?? []) paths.set(name, path ?? '/');
  }
  const dirs = new Map<Controller, string>();
  for (const [controller, mountPoint] of mounts) {
    const dir = join(mountPoint, paths.get(controller) ?? '/');
    try {
      accessSync(dir, constants.W_OK);
    } catch {
      return undefined;
    }
    dirs.set(controller, dir);
  }
  return dirs;
}

/**
 * Where this process sits in each cgroup v1 hierarchy, so job cgroups nest under ours and
 * inherit whatever limits the host already puts on us.
 */
function discoverHierarchies(): Map<Controller, string> | undefined {
  return cgroupDirsOf('self');
}

let hierarchies: Map<Controller, string> | undefined | null = null;

function writableHierarchies(): Map<Controller, string> | undefined {
  if (hierarchies === null) hierarchies = discoverHierarchies();
  return hierarchies;
}

export function cgroupsUnavailableReason(): string | undefined {
  return writableHierarchies() ? undefined : 'cgroup v1 controllers memory, cpu, cpuacct and pids are not all mounted and writable';
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

/** A job's cgroup in each v1 controller: limits, accounting, and the list of its processes. */
export class JobCgroup {
  private constructor(private readonly dirs: Map<Controller, string>) {}

  /** Creates `a2rl/<group>/<tag>` under this process's cgroups, or undefined where that is impossible. */
  static create(group: string, tag: string): JobCgroup | undefined {
    const bases = writableHierarchies();
    if (!bases) return undefined;
    return JobCgroup.createIn(bases, join('a2rl', group, tag));
  }

  /** Creates `relativePath` under the given cgroup folders (e.g. a container's), one per controller. */
  static createIn(parents: Map<Controller, string>, relativePath: string): JobCgroup {
    const dirs = new Map<Controller, string>();
    for (const [controller, parent] of parents) {
      const dir = join(parent, relativePath);
      mkdirSync(dir, { recursive: true });
      dirs.set(controller, dir);
    }
    return new JobCgroup(dirs);
  }

  /** The files a process writes its pid into to join this cgroup. */
  get procsFiles(): string[] {
    // cpu and cpuacct may share one hierarchy; joining it once is enough.
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
    this.write('cpu', 'cpu.cfs_period_us', period);
    this.write('cpu', 'cpu.cfs_quota_us', Math.round(limits.cpus * period));
    this.write('memory', 'memory.limit_in_bytes', limits.memoryBytes);
    this.write('pids', 'pids.max', limits.pids);
  }

  /** What the job has used so far: CPU time, current and peak memory. */
  usage(): ResourceUsage {
    return { cpuSeconds: this.cpuSeconds(), peakMemoryBytes: this.peakMemoryBytes(), memoryBytes: this.memoryBytes(), measured: true };
  }

  cpuSeconds(): number {
    return Number(this.read('cpuacct', 'cpuacct.usage') ?? 0) / 1e9;
  }

  peakMemoryBytes(): number {
    return Number(this.read('memory', 'memory.max_usage_in_bytes') ?? 0);
  }

  memoryBytes(): number {
    return Number(this.read('memory', 'memory.usage_in_bytes') ?? 0);
  }

  oomKills(): number {
    const match = /oom_kill (\d+)/.exec(this.read('memory', 'memory.oom_control') ?? '');
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
   */
  async killAll(): Promise<void> {
    const started = performance.now();
    for (let check = 0, waitMs = 1; this.pids().length > 0 && performance.now() - started < 2000; check++) {
      signalAll(this.pids(), 'SIGKILL');
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
    for (const base of new Set(writableHierarchies()?.values() ?? [])) tryRmdir(join(base, 'a2rl', group));
  }

  private read(controller: Controller, file: string): string | undefined {
    try {
      return readFileSync(join(this.dirs.get(controller)!, file), 'utf8');
    } catch {
      return undefined;
    }
  }

  private write(controller: Controller, file: string, value: number): void {
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
  for (const base of new Set(bases.values())) {
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
export function sweepChildCgroups(parents: Map<Controller, string>, prefix: string): void {
  for (const parent of new Set(parents.values())) {
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
