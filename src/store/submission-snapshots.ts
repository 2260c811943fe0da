import { randomBytes, createHash } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, read, renameSync, rmSync, write } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { A2rlError } from '../util/errors.js';
import { treeHash } from '../util/hashing.js';
import type { SafeDir } from '../util/safe-fs.js';

export interface SnapshotLimits {
  maxFiles: number;
  maxBytes: number;
  /** Files the checkpoint must hold at its top level: of each entry, at least one of the names. */
  required: string[][];
  /** What a checkpoint folder holds and how to save one, for messages. */
  holds: string;
  /** File endings refused anywhere in the folder, and why (e.g. pickled weights, which the grader never loads). */
  refused?: { suffixes: string[]; why: string };
}

export interface Snapshot {
  contentHash: string;
  dir: string;
  files: number;
  bytes: number;
  /** False when identical content was already stored (by any run). */
  created: boolean;
}

/** Folders a checkpoint may hold, and how deep: each stays open from listing to copy. */
const maxCheckpointFolders = 64;
const maxCheckpointDepth = 8;

interface PlannedFile {
  path: string;
  /** The open folder that holds it, and its name there: copied from that handle, never by path. */
  dir: SafeDir;
  name: string;
  size: number;
}

/**
 * Lists a checkpoint folder through handles, refusing anything that is not a plain file or
 * folder. The folders stay open (`opened`) until the copy is done, so a folder swapped or
 * moved meanwhile changes nothing: each file is then opened from the folder it was listed in.
 */
function plan(source: SafeDir, shownPath: string, limits: SnapshotLimits, opened: SafeDir[]): PlannedFile[] {
  const files: PlannedFile[] = [];
  let bytes = 0;
  let folders = 0;
  const tooLarge = () =>
    new A2rlError(
      'TOO_LARGE',
      `${shownPath} holds more than ${limits.maxFiles} files or ${limits.maxBytes} bytes; submit only the checkpoint: ${limits.holds}.`,
    );
  const walk = (dir: SafeDir, prefix: string, depth: number) => {
    const listed = dir.list(limits.maxFiles + maxCheckpointFolders + 1 - files.length - folders);
    if (listed.truncated) throw tooLarge();
    if (listed.unspellable > 0) {
      throw new A2rlError(
        'INVALID_INPUT',
        `${prefix ? `${shownPath}/${prefix}` : shownPath} holds ${listed.unspellable} names that are not valid UTF-8; rename or remove them with exec and submit again.`,
      );
    }
    for (const name of listed.names) {
      const path = prefix ? `${prefix}/${name}` : name;
      const stats = dir.lstat(name);
      if (!stats)
        throw new A2rlError('CONFLICT', `${shownPath}/${path} disappeared while it was being submitted; submit again once it is saved.`);
      if (stats.isSymbolicLink()) {
        throw new A2rlError(
          'INVALID_INPUT',
          `${shownPath}/${path} is a symlink; a submission must hold real files. Copy the file in its place (cp -L) and submit again.`,
        );
      }
      if (stats.isDirectory()) {
        if (++folders > maxCheckpointFolders || depth >= maxCheckpointDepth) {
          throw new A2rlError(
            'TOO_LARGE',
            `${shownPath} holds more than ${maxCheckpointFolders} folders or nests deeper than ${maxCheckpointDepth}; submit only the checkpoint: ${limits.holds}.`,
          );
        }
        const sub = dir.child(name);
        opened.push(sub);
        walk(sub, path, depth + 1);
        continue;
      }
      if (!stats.isFile()) throw new A2rlError('INVALID_INPUT', `${shownPath}/${path} is not a regular file; remove it and submit again.`);
      if (limits.refused?.suffixes.some((suffix) => name.endsWith(suffix))) {
        throw new A2rlError('INVALID_INPUT', `${shownPath}/${path}: ${limits.refused.why}`);
      }
      files.push({ path, dir, name, size: stats.size });
      bytes += stats.size;
      if (files.length > limits.maxFiles || bytes > limits.maxBytes) throw tooLarge();
    }
  };
  walk(source, '', 0);
  if (files.length === 0) {
    throw new A2rlError('INVALID_INPUT', `${shownPath} is empty. Save a checkpoint there (${limits.holds}) and submit again.`);
  }
  const missing = limits.required.filter((names) => !files.some((f) => names.includes(f.path))).map((names) => names.join(' or '));
  if (missing.length > 0) {
    throw new A2rlError('INVALID_INPUT', `${shownPath} lacks ${missing.join(', ')}. A checkpoint folder holds ${limits.holds}.`);
  }
  return files;
}

const readChunk = promisify(read);
const writeChunk = promisify(write);

/**
 * Copies the first `size` bytes of a file opened from its folder's handle, hashing exactly
 * what it copies: a file that grows meanwhile cannot push the snapshot past its limits. Reads
 * and writes go through the thread pool, a MiB at a time, so a large checkpoint never holds
 * the server's event loop for more than one chunk's hashing.
 */
async function copyHashed(file: PlannedFile, shown: string, target: string): Promise<string> {
  const hash = createHash('sha256');
  const input = file.dir.openFile(file.name, shown);
  let output: number;
  try {
    output = openSync(target, 'wx', 0o444);
  } catch (error) {
    closeSync(input);
    throw error;
  }
  try {
    const buffer = Buffer.allocUnsafe(1 << 20);
    for (let left = file.size; left > 0;) {
      const { bytesRead } = await readChunk(input, buffer, 0, Math.min(buffer.length, left), null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      for (let written = 0; written < bytesRead;) written += (await writeChunk(output, buffer, written, bytesRead - written)).bytesWritten;
      left -= bytesRead;
    }
  } finally {
    closeSync(input);
    closeSync(output);
  }
  return hash.digest('hex');
}

/**
 * Snapshots a checkpoint folder, open as `source`, into `storeDir/<contentHash>`, out of the
 * agent's reach. What is graded is this copy, whatever happens to the folder afterwards.
 * `beforeCopy` runs once the folder is planned and before anything is copied, and may refuse
 * (the run's disk quota).
 */
export async function snapshotDirectory(
  source: SafeDir,
  shownPath: string,
  storeDir: string,
  limits: SnapshotLimits,
  beforeCopy: () => Promise<void> = async () => {},
): Promise<Snapshot> {
  const opened: SafeDir[] = [];
  try {
    const files = plan(source, shownPath, limits, opened);
    const bytes = files.reduce((sum, f) => sum + f.size, 0);
    await beforeCopy();
    const staging = join(storeDir, `.staging-${randomBytes(8).toString('hex')}`);
    mkdirSync(staging, { recursive: true });
    try {
      const hashed: Array<{ path: string; sha256: string }> = [];
      for (const file of files) {
        const target = join(staging, file.path);
        mkdirSync(dirname(target), { recursive: true });
        hashed.push({ path: file.path, sha256: await copyHashed(file, `${shownPath}/${file.path}`, target) });
      }
      const contentHash = treeHash(hashed);
      const dir = join(storeDir, contentHash);
      const created = !existsSync(dir);
      if (created) {
        renameSync(staging, dir);
        lockDown(dir);
      } else rmSync(staging, { recursive: true, force: true });
      return { contentHash, dir, files: files.length, bytes, created };
    } catch (error) {
      rmSync(staging, { recursive: true, force: true });
      throw error;
    }
  } finally {
    for (const dir of opened) dir.close();
  }
}

function lockDown(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) lockDown(join(dir, entry.name));
  }
  chmodSync(dir, 0o555);
}

/** Deletes a snapshot this call stored but nothing will use. */
export function discardSnapshot(snapshot: Snapshot): void {
  if (!snapshot.created) return;
  const unlock = (dir: string) => {
    chmodSync(dir, 0o755);
    for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) unlock(join(dir, entry.name));
  };
  unlock(snapshot.dir);
  rmSync(snapshot.dir, { recursive: true, force: true });
}
