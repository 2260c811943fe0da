import { readdirSync, readFileSync } from 'node:fs';

/** Parent of each live process, from /proc. */
function parentMap(): Map<number, number> {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name may hold spaces and parentheses: fields start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parents.set(Number(entry), Number(fields[1]));
    } catch {
      // The process ended while we looked.
    }
  }
  return parents;
}

/** `root` and all its live descendants, parents first. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, parent] of parentMap()) {
    const list = children.get(parent) ?? [];
    list.push(pid);
    children.set(parent, list);
  }
  const tree: number[] = [];
  const pending = [root];
  while (pending.length > 0) {
    const pid = pending.shift()!;
    tree.push(pid);
    pending.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** Whether `pid` is this process's parent, grandparent, and so on. */
export function isAncestor(pid: number): boolean {
  for (let current = process.ppid; current > 1;) {
    if (current === pid) return true;
    try {
      const stat = readFileSync(`/proc/${current}/stat`, 'utf8');
      current = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      return false;
    }
  }
  return false;
}

/**
 * Start time of a live process in clock ticks since boot: with the pid, it names a process
 * uniquely. Undefined for a zombie: it has ended, and a parent that never reaps it (an
 * init that does not) must not make it look alive.
 */
export function processStartTime(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' ? undefined : Number(fields[19]);
  } catch {
    return undefined;
  }
}

export function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** Whether the process an owner name (`<pid>-<start time>`, src/core/ownership.ts) names is still the one running. */
export function ownerAlive(owner: string): boolean {
  const [pid, startTime] = owner.split('-').map(Number);
  return pid !== undefined && processStartTime(pid) === startTime;
}
