import { Worker } from 'node:worker_threads';

export interface DiskUsage {
  bytes: number;
  /** Files and folders counted. */
  entries: number;
}

/**
 * The walker thread. Walks in flight take turns, a slice of entries each, so a tree of
 * millions of files never holds back a small one. Evaluated code, so it runs the same from
 * the sources (tests) and from dist.
 */
const walkerSource = `
const { parentPort } = require('node:worker_threads');
const { lstatSync, readdirSync } = require('node:fs');
const { join } = require('node:path');
const sliceEntries = 2000;
const walks = [];
let scheduled = false;
parentPort.on('message', ({ id, roots }) => {
  walks.push({ id, paths: [...roots], seen: new Set(), bytes: 0, entries: 0 });
  schedule();
});
function schedule() {
  if (scheduled || walks.length === 0) return;
  scheduled = true;
  setImmediate(() => {
    scheduled = false;
    const walk = walks.shift();
    for (let n = 0; n < sliceEntries && walk.paths.length > 0; n++) visit(walk, walk.paths.pop());
    if (walk.paths.length > 0) walks.push(walk);
    else parentPort.postMessage({ id: walk.id, bytes: walk.bytes, entries: walk.entries });
    schedule();
  });
}
function visit(walk, path) {
  let stat;
  try {
    stat = lstatSync(path);
  } catch {
    return; // deleted during the walk
  }
  // Each inode once: a hard-linked file, a folder reached from two roots.
  if (stat.isDirectory() || stat.nlink > 1) {
    const key = stat.dev + ':' + stat.ino;
    if (walk.seen.has(key)) return;
    walk.seen.add(key);
  }
  walk.entries++;
  walk.bytes += stat.blocks * 512;
  if (!stat.isDirectory()) return;
  try {
    for (const name of readdirSync(path)) walk.paths.push(join(path, name));
  } catch {
    // deleted during the walk
  }
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
  started.worker.on('message', ({ id, bytes, entries }: DiskUsage & { id: number }) => {
    const waiting = started.pending.get(id);
    started.pending.delete(id);
    if (started.pending.size === 0) started.worker.unref();
    waiting?.resolve({ bytes, entries });
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
 * twice), links not followed. Files deleted during the walk are skipped.
 */
export function diskUsage(roots: string[]): Promise<DiskUsage> {
  const current = (walker ??= startWalker());
  const id = current.nextId++;
  return new Promise((resolve, reject) => {
    current.pending.set(id, { resolve, reject });
    current.worker.ref();
    current.worker.postMessage({ id, roots });
  });
}
