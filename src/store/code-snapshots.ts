import { closeSync, existsSync, lstatSync, mkdirSync, readFileSync, readSync, renameSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { sha256, treeHash } from '../util/hashing.js';
import type { RecordEvent } from './events.js';
import { openForRead, readDirBounded } from '../util/safe-fs.js';

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

/**
 * Content-addressed store of code snapshots under `dir`: `objects/<sha256>` holds each
 * distinct file once, `trees/<tree>.json` each distinct folder state once.
 */
export class CodeSnapshots {
  constructor(readonly dir: string) {}

  /** Snapshots `codeDir` (which the agent may change meanwhile: files are opened without following links). */
  snapshot(codeDir: string): CodeTree & { bytes: number } {
    const files: CodeFile[] = [];
    const skipped: CodeTree['skipped'] = [];
    let bytes = 0;
    let entries = 0;
    let unnamed = 0;
    const skip = (path: string, reason: string) => {
      if (skipped.length < codeSnapshotLimits.maxSkipped) skipped.push({ path, reason });
      else unnamed++;
    };
    const walk = (dir: string, prefix: string) => {
      const listed = readDirBounded(dir, codeSnapshotLimits.maxEntries - entries);
      if (listed.truncated)
        skip(prefix || '.', `past the snapshot limits: the walk stopped after ${codeSnapshotLimits.maxEntries} entries`);
      for (const name of listed.names) {
        if (name === '__pycache__') continue;
        entries++;
        const path = prefix ? `${prefix}/${name}` : name;
        const full = join(dir, name);
        const stats = lstatSync(full);
        if (stats.isDirectory()) walk(full, path);
        else if (!stats.isFile()) skip(path, stats.isSymbolicLink() ? 'symlink' : 'not a regular file');
        else if (stats.size > codeSnapshotLimits.maxFileBytes) skip(path, `larger than ${codeSnapshotLimits.maxFileBytes} bytes`);
        else if (files.length >= codeSnapshotLimits.maxFiles || bytes + stats.size > codeSnapshotLimits.maxBytes) {
          skip(path, 'past the snapshot limits');
        } else {
          const content = readAtMost(full, codeDir, path, codeSnapshotLimits.maxFileBytes);
          const file = { path, sha256: sha256(content), bytes: content.length };
          this.putObject(file.sha256, content);
          files.push(file);
          bytes += content.length;
        }
      }
    };
    if (existsSync(codeDir)) walk(codeDir, '');
    if (unnamed > 0) skipped.push({ path: '…', reason: `${unnamed} more files left out, not named` });
    const tree: CodeTree = { tree: treeHash(files), files, skipped };
    const treeFile = join(this.dir, 'trees', `${tree.tree}.json`);
    if (!existsSync(treeFile)) writeAtomically(treeFile, JSON.stringify(tree));
    return { ...tree, bytes };
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

  private putObject(hash: string, content: Buffer): void {
    const target = join(this.dir, 'objects', hash);
    if (!existsSync(target)) writeAtomically(target, content);
  }
}

/** The code snapshots of every run a server home holds. */
export function codeSnapshotsOf(home: string): CodeSnapshots {
  return new CodeSnapshots(join(home, 'code-snapshots'));
}

/** Snapshots a run's code/ folder and records it; a failure is recorded, never thrown: the tool call goes on. */
export function recordCodeSnapshot(
  snapshots: CodeSnapshots,
  codeDir: string,
  record: RecordEvent,
  trigger: { job_id: number } | { submission_id: number },
): string | undefined {
  try {
    const { tree, files, bytes, skipped } = snapshots.snapshot(codeDir);
    record('snapshot', 'code', { ...trigger, tree, files: files.length, bytes, skipped });
    return tree;
  } catch (error) {
    record('snapshot', 'code', { ...trigger, error: String(error) });
    return undefined;
  }
}

function readAtMost(path: string, base: string, shown: string, limit: number): Buffer {
  const fd = openForRead(path, base, shown);
  try {
    const buffer = Buffer.alloc(limit);
    let length = 0;
    for (let n = -1; n !== 0 && length < limit; length += n) n = readSync(fd, buffer, length, limit - length, null);
    return buffer.subarray(0, length);
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
