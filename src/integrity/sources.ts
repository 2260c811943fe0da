import { closeSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { codeSnapshotsOf } from '../store/code-snapshots.js';
import type { RunRow, Store } from '../store/store.js';
import { SafeDir } from '../util/safe-fs.js';
import type { ContaminationScan, SourceRef } from './hidden-index.js';
import { scanParquet } from './parquet.js';

/** What a check read of a run, and what it could not read (so a reader knows what a clean verdict covers). */
export interface ScanCoverage {
  /** Files read as text (workspace, code snapshots, submissions), and the bytes of all texts read, write_file calls' included. */
  files: number;
  bytes: number;
  write_file_calls: number;
  code_snapshots: number;
  submissions: number;
  /** Binary files (a NUL byte in their first 8 KiB: checkpoints, tensors, archives): counted, not read. */
  binary_files: number;
  binary_bytes: number;
  /** Files that hold text the check cannot read (Arrow IPC, a malformed Parquet file, a Parquet row group too large), or that could not be opened. */
  unread: Array<{ source: SourceRef; reason: string }>;
}

const blockBytes = 16 * 2 ** 20;
/** Each block is scanned with the end of the one before, so an item cut by a block boundary is still whole in one chunk. */
const overlapChars = 8192;
const sniffBytes = 8192;
/** How deep and how wide a workspace is walked: as far as the disk account walks, and the run's entry limit. */
const maxDepth = 256;
const maxEntries = 200_000;
const maxUnreadNamed = 200;

/** File endings whose text is stored in a form the scan cannot read: named in `unread`. */
const unreadableFormats: Record<string, string> = {
  '.arrow': 'Arrow IPC: not read',
  '.feather': 'Arrow IPC: not read',
};

export function emptyCoverage(): ScanCoverage {
  return { files: 0, bytes: 0, write_file_calls: 0, code_snapshots: 0, submissions: 0, binary_files: 0, binary_bytes: 0, unread: [] };
}

function unread(coverage: ScanCoverage, source: SourceRef, reason: string): void {
  if (coverage.unread.length < maxUnreadNamed) coverage.unread.push({ source, reason });
}

/** Scans a text given whole (a write_file call's content, a stored object). */
function scanBuffer(content: Buffer | string, source: SourceRef, scan: ContaminationScan, coverage: ScanCoverage): void {
  const bytes = typeof content === 'string' ? Buffer.byteLength(content) : content.length;
  if (typeof content !== 'string' && content.subarray(0, sniffBytes).includes(0)) {
    coverage.binary_files++;
    coverage.binary_bytes += bytes;
    return;
  }
  if (typeof content !== 'string') coverage.files++;
  coverage.bytes += bytes;
  scan.scan(source, { text: typeof content === 'string' ? content : content.toString('utf8'), offset: 0, line: 1 });
}

/** Scans an open Parquet file's text columns row by row (src/integrity/parquet.ts), and closes it. */
function scanParquetFile(fd: number, source: SourceRef, scan: ContaminationScan, coverage: ScanCoverage): void {
  try {
    coverage.bytes += scanParquet(fd, source, scan, (reason) => unread(coverage, source, reason));
    coverage.files++;
  } catch (error) {
    unread(coverage, source, `Parquet file not read: ${(error as Error).message}`);
  } finally {
    closeSync(fd);
  }
}

/** Scans an open file in blocks (a 1 GB file never becomes one string), and closes it. */
function scanFile(fd: number, source: SourceRef, scan: ContaminationScan, coverage: ScanCoverage): void {
  try {
    const block = Buffer.allocUnsafe(blockBytes);
    const decoder = new StringDecoder('utf8');
    let carry = '';
    let offset = 0;
    let line = 1;
    let bytes = 0;
    for (let first = true; ; first = false) {
      const read = readSync(fd, block, 0, blockBytes, null);
      if (first && block.subarray(0, Math.min(read, sniffBytes)).includes(0)) {
        coverage.binary_files++;
        coverage.binary_bytes += read + countRest(fd, block);
        return;
      }
      bytes += read;
      const text = carry + (read > 0 ? decoder.write(block.subarray(0, read)) : decoder.end());
      if (text.length > carry.length || first) scan.scan(source, { text, offset, line });
      if (read === 0) break;
      const cut = Math.max(0, text.length - overlapChars);
      for (let i = text.indexOf('\n'); i !== -1 && i < cut; i = text.indexOf('\n', i + 1)) line++;
      offset += cut;
      carry = text.slice(cut);
    }
    coverage.files++;
    coverage.bytes += bytes;
  } finally {
    closeSync(fd);
  }
}

function countRest(fd: number, block: Buffer): number {
  let total = 0;
  for (let read = readSync(fd, block, 0, block.length, null); read > 0; read = readSync(fd, block, 0, block.length, null)) total += read;
  return total;
}

/**
 * Walks a folder through handles (src/util/safe-fs.ts: every name opened from its folder's descriptor, no link
 * followed, as every server access to a workspace), scanning each regular file.
 */
function scanFolder(root: SafeDir, kind: SourceRef['kind'], prefix: string, scan: ContaminationScan, coverage: ScanCoverage): void {
  let entries = 0;
  const walk = (dir: SafeDir, at: string, depth: number) => {
    const listed = dir.list(maxEntries - entries);
    if (listed.truncated) unread(coverage, { kind, path: at || '.' }, `more than ${maxEntries} entries: the rest not read`);
    if (listed.unspellable > 0) unread(coverage, { kind, path: at || '.' }, `${listed.unspellable} names that are not UTF-8: not read`);
    for (const name of listed.names) {
      entries++;
      const path = at ? `${at}/${name}` : name;
      const source = { kind, path: `${prefix}${path}` };
      const stats = dir.lstat(name);
      if (!stats) continue;
      if (stats.isDirectory()) {
        if (depth >= maxDepth) {
          unread(coverage, source, `nested deeper than ${maxDepth} folders: not read`);
          continue;
        }
        let sub: SafeDir;
        try {
          sub = dir.child(name);
        } catch (error) {
          unread(coverage, source, `changed during the check: ${(error as Error).message}`);
          continue;
        }
        try {
          walk(sub, path, depth + 1);
        } finally {
          sub.close();
        }
        continue;
      }
      if (!stats.isFile()) continue; // links are never followed; what they point at is scanned where it lies
      const format = Object.entries(unreadableFormats).find(([suffix]) => name.toLowerCase().endsWith(suffix));
      if (format) {
        unread(coverage, source, format[1]);
        continue;
      }
      let fd: number;
      try {
        fd = dir.openFile(name, path);
      } catch (error) {
        unread(coverage, source, `could not be opened: ${(error as Error).message}`);
        continue;
      }
      if (name.toLowerCase().endsWith('.parquet')) scanParquetFile(fd, source, scan, coverage);
      else scanFile(fd, source, scan, coverage);
    }
  };
  walk(root, '', 0);
}

/**
 * Scans everything of a run the agent could train from: its workspace (every text file, whatever the folder: code,
 * data, outputs, rollouts), every code snapshot, every submitted folder, and every write_file call's content. Stored
 * objects shared by several snapshots are read once.
 */
export function scanRunSources(store: Store, home: string, run: RunRow, scan: ContaminationScan): ScanCoverage {
  const coverage = emptyCoverage();
  const workspace = join(run.dir, 'workspace');
  try {
    SafeDir.withTrusted(workspace, (root) => scanFolder(root, 'workspace', '', scan, coverage));
  } catch (error) {
    unread(coverage, { kind: 'workspace', path: '.' }, `the workspace could not be opened: ${(error as Error).message}`);
  }

  const snapshots = codeSnapshotsOf(home);
  const seenObjects = new Set<string>();
  const trees = new Set<string>();
  for (const event of store.listEvents(run.id, 'snapshot')) {
    const tree = event.name === 'code' ? (JSON.parse(event.data) as { tree?: string }).tree : undefined;
    if (!tree || trees.has(tree)) continue;
    trees.add(tree);
    coverage.code_snapshots++;
    let files;
    try {
      files = snapshots.read(tree).files;
    } catch (error) {
      unread(coverage, { kind: 'code_snapshot', path: tree }, `the snapshot could not be read: ${(error as Error).message}`);
      continue;
    }
    for (const file of files) {
      if (seenObjects.has(file.sha256)) continue;
      seenObjects.add(file.sha256);
      scanBuffer(snapshots.readFile(file), { kind: 'code_snapshot', path: `${tree.slice(0, 12)}:code/${file.path}` }, scan, coverage);
    }
  }

  for (const submission of store.listSubmissions(run.id)) {
    coverage.submissions++;
    const folder = join(home, 'submissions', submission.content_hash);
    try {
      SafeDir.withTrusted(folder, (root) => scanFolder(root, 'submission', `sub-${submission.seq ?? submission.id}:`, scan, coverage));
    } catch (error) {
      unread(coverage, { kind: 'submission', path: `sub-${submission.seq ?? submission.id}` }, `not stored: ${(error as Error).message}`);
    }
  }

  const tools = store.listEvents(run.id, 'tool');
  tools.forEach((event) => {
    if (event.name !== 'write_file') return;
    const args = (JSON.parse(event.data) as { arguments?: { path?: unknown; content?: unknown } }).arguments;
    if (typeof args?.content !== 'string') return;
    coverage.write_file_calls++;
    scanBuffer(args.content, { kind: 'write_file', path: `event ${event.id}: ${String(args.path)}` }, scan, coverage);
  });
  return coverage;
}
