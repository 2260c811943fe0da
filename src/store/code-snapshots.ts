import { closeSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { sha256, treeHash } from '../util/hashing.js';
import type { RecordEvent } from './events.js';
import { isA2rlError } from '../util/errors.js';
import { type SafeDir, readAt } from '../util/safe-fs.js';

/**
 * What one snapshot of a workspace's code/ folder keeps: source, not data or checkpoints.
 * The walk itself stops after `maxEntries` files and folders, and names at most `maxSkipped`
 * of the files it leaves out: a code/ of millions of files costs no more than one of thousands.
 */
export const codeSnapshotLimits = {
  maxFiles: 2000,
  maxFileBytes: 2 * 2 ** 20,
  maxBytes: 32 * 2 ** 20,
  maxEntries: 10_000,
  maxSkipped: 100,
  maxDepth: 64,
};

export interface CodeFile {
  path: string;
  sha256: string;
  bytes: number;
}

export interface CodeTree {
  /** Tree hash of `files` (the same hash for the same content, wherever and whenever). */
  tree: string;
  files: CodeFile[];
  /** Files left out, and why (too large, a symlink, past the limits). */
  skipped: Array<{ path: string; reason: string }>;
}

/** A snapshot read from a workspace, not yet kept: its tree, and each file's content by hash. */
export interface ReadSnapshot extends CodeTree {
  bytes: number;
  contents: Map<string, Buffer>;
}

/**
 * Content-addressed store of code snapshots under `dir`: `objects/<sha256>` holds each
 * distinct file once, `trees/<tree>.json` each distinct folder state once.
 */
export class CodeSnapshots {
  constructor(readonly dir: string) {}

  /**
   * Reads a code/ folder (which the agent may change meanwhile) through its handle: every
   * name opened from its folder's handle, no link followed, at most `codeSnapshotLimits`.
   * Nothing is stored yet: the run is charged first (`recordCodeSnapshot`), then `keep` stores it.
   */
  readFolder(code: SafeDir | undefined): ReadSnapshot {
    const files: CodeFile[] = [];
    const contents = new Map<string, Buffer>();
    const skipped: CodeTree['skipped'] = [];
    let bytes = 0;
    let entries = 0;
    let unnamed = 0;
    const skip = (path: string, reason: string) => {
      if (skipped.length < codeSnapshotLimits.maxSkipped) skipped.push({ path, reason });
      else unnamed++;
    };
    const walk = (dir: SafeDir, prefix: string, depth: number) => {
      const listed = dir.list(codeSnapshotLimits.maxEntries - entries);
      if (listed.truncated)
        skip(prefix || '.', `past the snapshot limits: the walk stopped after ${codeSnapshotLimits.maxEntries} entries`);
      if (listed.unspellable > 0) skip(prefix || '.', `${listed.unspellable} names that are not valid UTF-8`);
      for (const name of listed.names) {
        if (name === '__pycache__') continue;
        entries++;
        const path = prefix ? `${prefix}/${name}` : name;
        const stats = dir.lstat(name);
        if (!stats) continue; // deleted during the walk
        if (stats.isDirectory()) {
          if (depth >= codeSnapshotLimits.maxDepth) {
            skip(path, `nested deeper than ${codeSnapshotLimits.maxDepth} folders`);
            continue;
          }
          let sub: SafeDir;
          try {
            sub = dir.child(name);
          } catch (error) {
            skip(path, `changed during the snapshot: ${(error as Error).message}`);
            continue;
          }
          try {
            walk(sub, path, depth + 1);
          } finally {
            sub.close();
          }
        } else if (!stats.isFile()) skip(path, stats.isSymbolicLink() ? 'symlink' : 'not a regular file');
        else if (stats.size > codeSnapshotLimits.maxFileBytes) skip(path, `larger than ${codeSnapshotLimits.maxFileBytes} bytes`);
        else if (files.length >= codeSnapshotLimits.maxFiles || bytes + stats.size > codeSnapshotLimits.maxBytes) {
          skip(path, 'past the snapshot limits');
        } else {
          let content: Buffer;
          try {
            content = readAtMost(dir.openFile(name, path), Math.min(codeSnapshotLimits.maxFileBytes, codeSnapshotLimits.maxBytes - bytes));
          } catch (error) {
            skip(path, `changed during the snapshot: ${(error as Error).message}`);
            continue;
          }
          const file = { path, sha256: sha256(content), bytes: content.length };
          contents.set(file.sha256, content);
          files.push(file);
          bytes += content.length;
        }
      }
    };
    if (code) walk(code, '', 0);
    if (unnamed > 0) skipped.push({ path: '…', reason: `${unnamed} more files left out, not named` });
    return { tree: treeHash(files), files, skipped, bytes, contents };
  }

  /** Stores a snapshot read by `readFolder`: its new objects, and its tree once. */
  keep(snapshot: ReadSnapshot): void {
    for (const [hash, content] of snapshot.contents) {
      const target = join(this.dir, 'objects', hash);
      if (!existsSync(target)) writeAtomically(target, content);
    }
    const treeFile = join(this.dir, 'trees', `${snapshot.tree}.json`);
    const tree: CodeTree = { tree: snapshot.tree, files: snapshot.files, skipped: snapshot.skipped };
    if (!existsSync(treeFile)) writeAtomically(treeFile, JSON.stringify(tree));
  }

  read(tree: string): CodeTree {
    return JSON.parse(readFileSync(join(this.dir, 'trees', `${tree}.json`), 'utf8')) as CodeTree;
  }

  readFile(file: CodeFile): Buffer {
    return readFileSync(join(this.dir, 'objects', file.sha256));
  }

  /** Writes a snapshot's files as a plain folder (for exports). */
  materialize(tree: string, targetDir: string): void {
    for (const file of this.read(tree).files) {
      const target = join(targetDir, file.path);
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, this.readFile(file));
    }
  }
}

/** The code snapshots of every run a server home holds. */
export function codeSnapshotsOf(home: string): CodeSnapshots {
  return new CodeSnapshots(join(home, 'code-snapshots'));
}

/**
 * Snapshots a run's code/ folder and records it; a failure is recorded, never thrown: the tool
 * call goes on. `openCode` opens code/ without following links; a code/ that is absent is an
 * empty snapshot, one that is a link or a file is recorded as skipped. The event (what charges
 * the run's disk account) is recorded before anything is stored, so nothing kept is charged to no one.
 */
export function recordCodeSnapshot(
  snapshots: CodeSnapshots,
  openCode: () => SafeDir,
  record: RecordEvent,
  trigger: { job_id: number } | { submission_id: number },
): string | undefined {
  let read: ReadSnapshot;
  try {
    read = readCode(snapshots, openCode);
  } catch (error) {
    record('snapshot', 'code', { ...trigger, error: String(error) });
    return undefined;
  }
  const { tree, files, bytes, skipped } = read;
  record('snapshot', 'code', { ...trigger, tree, files: files.length, bytes, skipped });
  try {
    snapshots.keep(read);
    return tree;
  } catch (error) {
    record('snapshot', 'code_not_kept', { ...trigger, tree, error: String(error) });
    return undefined;
  }
}

function readCode(snapshots: CodeSnapshots, openCode: () => SafeDir): ReadSnapshot {
  let code: SafeDir;
  try {
    code = openCode();
  } catch (error) {
    if (!isA2rlError(error)) throw error;
    const empty = snapshots.readFolder(undefined);
    return error.code === 'NOT_FOUND' ? empty : { ...empty, skipped: [{ path: 'code', reason: `not snapshotted: ${error.message}` }] };
  }
  try {
    return snapshots.readFolder(code);
  } finally {
    code.close();
  }
}

/** Reads at most `limit` bytes of an open file (no more than it held when opened: one that grows is cut), and closes it. */
function readAtMost(fd: number, limit: number): Buffer {
  try {
    return readAt(fd, 0, limit);
  } finally {
    closeSync(fd);
  }
}

function writeAtomically(target: string, content: string | Buffer): void {
  mkdirSync(dirname(target), { recursive: true });
  const staging = `${target}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(staging, content);
  renameSync(staging, target);
}
