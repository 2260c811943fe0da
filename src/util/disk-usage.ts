import { statfsSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

export interface DiskUsage {
  bytes: number;
  /** Files and folders counted. */
  entries: number;
  /**
   * Why part of the tree could not be measured (nested deeper than `maxWalkDepth`, a folder
   * that could not be read): the figure is then a lower bound, and the caller must fail closed.
   */
  unmeasured?: string;
  /** A folder turned into something else (a link, a file) between being seen and being opened: the figure may miss its contents. */
  raced?: boolean;
}

/** Deepest nesting walked; deeper trees are unmeasured. Each level holds one descriptor while the walk is below it. */
export const maxWalkDepth = 256;

/**
 * The walker thread. Walks in flight take turns, a slice of entries each, so a tree of
 * millions of files never holds back a small one. Like every server access to a folder an
 * agent can change (src/util/safe-fs.ts), it opens each folder from its parent's descriptor
 * (`/proc/self/fd/<fd>/<name>`, no link followed) and never builds a long path: a rename or a
 * swapped folder cannot lead it outside, and no nesting makes a name too long to look up.
 * Names are read as bytes, so any name is counted. Evaluated code, so it runs the same from
 * the sources (tests) and from dist.
 */
const walkerSource = `
const { parentPort } = require('node:worker_threads');
const { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync } = require('node:fs');
const dirFlags = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const sliceEntries = 2000;
const maxDepth = ${maxWalkDepth};
const walks = [];
let scheduled = false;
parentPort.on('message', ({ id, roots, skip }) => {
  const walk = { id, frames: [], seen: new Set(), bytes: 0, entries: 0, unmeasured: undefined, raced: false, skip: new Set(skip) };
  for (const root of roots) {
    let fd;
    try {
      fd = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (error) {
      if (error.code !== 'ENOENT') walk.unmeasured = root + ' could not be opened (' + error.code + ')';
      continue;
    }
    if (count(walk, fstatSync(fd))) enter(walk, fd, 0);
    else closeSync(fd);
  }
  walks.push(walk);
  schedule();
});
function schedule() {
  if (scheduled || walks.length === 0) return;
  scheduled = true;
  setImmediate(() => {
    scheduled = false;
    const walk = walks.shift();
    for (let n = 0; n < sliceEntries && walk.frames.length > 0 && walk.unmeasured === undefined; n++) step(walk);
    if (walk.frames.length > 0 && walk.unmeasured === undefined) walks.push(walk);
    else {
      for (const frame of walk.frames) closeSync(frame.fd);
      parentPort.postMessage({ id: walk.id, bytes: walk.bytes, entries: walk.entries, unmeasured: walk.unmeasured, raced: walk.raced });
    }
    schedule();
  });
}
/** Counts an inode once (a hard-linked file, a folder reached from two roots); true when it is a folder to enter. */
function count(walk, stat) {
  if (stat.isDirectory() || stat.nlink > 1) {
    const key = stat.dev + ':' + stat.ino;
    if (walk.seen.has(key)) return false;
    walk.seen.add(key);
  }
  walk.entries++;
  walk.bytes += stat.blocks * 512;
  return stat.isDirectory();
}
function enter(walk, fd, depth) {
  try {
    const names = readdirSync('/proc/self/fd/' + fd, { encoding: 'buffer' });
    walk.frames.push({ fd, depth, names: depth === 0 ? names.filter((name) => !walk.skip.has(name.toString('latin1'))) : names, next: 0 });
  } catch (error) {
    closeSync(fd);
    if (error.code !== 'ENOENT') walk.unmeasured = 'a folder could not be read (' + error.code + ')';
  }
}
function step(walk) {
  const frame = walk.frames[walk.frames.length - 1];
  if (frame.next >= frame.names.length) {
    walk.frames.pop();
    closeSync(frame.fd);
    return;
  }
  const path = Buffer.concat([Buffer.from('/proc/self/fd/' + frame.fd + '/'), frame.names[frame.next++]]);
  let stat;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if (error.code !== 'ENOENT') walk.unmeasured = 'an entry could not be measured (' + error.code + ')';
    return; // ENOENT: deleted during the walk
  }
  if (!stat.isDirectory()) {
    count(walk, stat);
    return;
  }
  // A folder is opened first and counted as opened: a swap between the look and the open cannot count one thing and enter another.
  let fd;
  try {
    fd = openSync(path, dirFlags);
  } catch (error) {
    if (error.code === 'ENOTDIR' || error.code === 'ELOOP') walk.raced = true;
    else if (error.code !== 'ENOENT') walk.unmeasured = 'a folder could not be opened (' + error.code + ')';
    return;
  }
  if (!count(walk, fstatSync(fd))) {
    closeSync(fd);
    return;
  }
  if (frame.depth + 1 >= maxDepth) {
    closeSync(fd);
    walk.unmeasured = 'folders nest deeper than ' + maxDepth + ' levels';
    return;
  }
  enter(walk, fd, frame.depth + 1);
}
`;

interface Walker {
  worker: Worker;
  pending: Map<number, { resolve: (usage: DiskUsage) => void; reject: (error: Error) => void }>;
  nextId: number;
}

/** One walker thread per process, started on first use; it keeps the process alive only while a walk is pending. */
let walker: Walker | undefined;

function startWalker(): Walker {
  const started: Walker = { worker: new Worker(walkerSource, { eval: true }), pending: new Map(), nextId: 0 };
  started.worker.unref();
  started.worker.on('message', ({ id, ...usage }: DiskUsage & { id: number }) => {
    const waiting = started.pending.get(id);
    started.pending.delete(id);
    if (started.pending.size === 0) started.worker.unref();
    waiting?.resolve(usage);
  });
  // A dead walker fails what it held; the next measurement starts a new one.
  const fail = (error: Error) => {
    if (walker === started) walker = undefined;
    for (const waiting of started.pending.values()) waiting.reject(new Error(`the disk walker stopped: ${error.message}`));
    started.pending.clear();
  };
  started.worker.on('error', fail);
  started.worker.on('exit', (code) => fail(new Error(`exit code ${code}`)));
  return started;
}

/**
 * Bytes a set of folder trees takes on disk, walked in a thread of its own, so a tree of
 * millions of files never blocks the caller's event loop, and no measurement forks the
 * process (a fork of a large server blocks its loop for milliseconds): allocated blocks (a
 * sparse file counts what it really uses), each inode once (hard links, and trees named
 * twice), links not followed. Files deleted during the walk are skipped; what cannot be
 * measured is said in `unmeasured`, and a folder swapped during the walk in `raced`. Names in `skip` are
 * left out where they lie directly in a root (a run's mounted filesystem, measured by the kernel instead).
 */
export function diskUsage(roots: string[], skip: string[] = []): Promise<DiskUsage> {
  const current = (walker ??= startWalker());
  const id = current.nextId++;
  return new Promise((resolve, reject) => {
    current.pending.set(id, { resolve, reject });
    current.worker.ref();
    current.worker.postMessage({ id, roots, skip });
  });
}

/** Bytes free on the filesystem of `path` for whoever runs this process (root may use the blocks kept for it). */
export function freeBytes(path: string): number {
  const stats = statfsSync(path);
  return (process.getuid?.() === 0 ? stats.bfree : stats.bavail) * stats.bsize;
}
