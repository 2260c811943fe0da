import { requireWorkspaceFilesystem, withWorkspaceReadable } from '../../sandbox/run-storage.js';
import { closeSync } from 'node:fs';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { codeSnapshotsOf } from '../store/code-snapshots.js';
import type { RunRow, Store } from '../store/store.js';
import { SafeDir } from '../util/safe-fs.js';
import type { ContaminationScan, SourceRef } from './hidden-index.js';
import {
  arrowText,
  bufferSource,
  type ByteSource,
  DecodeBudget,
  decodeWithCommand,
  fileSource,
  GunzipReader,
  inflateBounded,
  maxNesting,
  type Member,
  pickleText,
  printableRuns,
  sniff,
  tarMembers,
  UnreadableError,
  zipDirectory,
  zipMembers,
} from './formats.js';
import { scanParquet } from './parquet.js';

/** What a check read of a run, and what it could not read (so a reader knows what a clean verdict covers). */
export interface ScanCoverage {
  /** Files read (workspace, code snapshots, submissions; archive members counted in `members`), and the bytes of all texts read, write_file calls' and command lines' included. */
  files: number;
  bytes: number;
  write_file_calls: number;
  /** exec and run_training command lines, read as files (a heredoc writes items that a job reads and deletes). */
  command_lines: number;
  code_snapshots: number;
  submissions: number;
  /** Members of zip and tar archives, and decoded gzip streams, read. */
  members: number;
  /** Binary files (pickles by their string constants, anything else by its printable runs, like `strings`): read, and how many bytes. */
  binary_files: number;
  binary_bytes: number;
  /** Bytes of every file (on disk: its allocated blocks) and text the check was given (what `unread_share` is a share of). */
  source_bytes: number;
  /**
   * What the check could not read, each with its bytes on disk and why: a decoder refused it (a declared size or count
   * past what its bytes can hold, a format with no decoder here), it could not be opened, or a limit stopped the walk.
   * The first `maxUnreadNamed` are named; `unread_bytes` counts them all.
   */
  unread: Array<{ source: SourceRef; reason: string; bytes: number }>;
  unread_bytes: number;
  /** A folder's walk stopped short (the entry limit, names that are not UTF-8): what it left is not sized, so the share is 1. */
  walk_cut: boolean;
  /** unread_bytes / source_bytes (1 when the workspace could not be opened or a walk was cut): any share above 0 leaves the check `incomplete` (src/integrity/verdict.ts). */
  unread_share: number;
}

const blockBytes = 16 * 2 ** 20;
/** Each block is scanned with the end of the one before, so an item cut by a block boundary is still whole in one chunk. */
const overlapChars = 8192;
const sniffBytes = 8192;
/** How wide a workspace is walked: the run's entry limit (any depth: the walk keeps no descriptor per level). */
const maxEntries = 200_000;
const maxUnreadNamed = 200;

export function emptyCoverage(): ScanCoverage {
  return {
    files: 0,
    bytes: 0,
    write_file_calls: 0,
    command_lines: 0,
    code_snapshots: 0,
    submissions: 0,
    members: 0,
    binary_files: 0,
    binary_bytes: 0,
    source_bytes: 0,
    unread: [],
    unread_bytes: 0,
    walk_cut: false,
    unread_share: 0,
  };
}

function unread(coverage: ScanCoverage, source: SourceRef, reason: string, bytes = 0): void {
  coverage.unread_bytes += bytes;
  if (coverage.unread.length < maxUnreadNamed) coverage.unread.push({ source, reason, bytes });
}

/** Scans a text given whole (a write_file call's content, a command line). */
function scanText(text: string, source: SourceRef, scan: ContaminationScan, coverage: ScanCoverage): void {
  const bytes = Buffer.byteLength(text);
  coverage.source_bytes += bytes;
  coverage.bytes += bytes;
  scanString(text, source, scan);
}

/** How the bytes of a text-like source become text: UTF-8, UTF-16, or printable runs of a binary. */
type TextMode = 'utf8' | 'utf16le' | 'utf16be' | 'binary';

/** Scans a source in blocks (a 1 GB file never becomes one string); returns the bytes read. */
function scanBlocks(file: ByteSource, mode: TextMode, source: SourceRef, scan: ContaminationScan): number {
  const decoder = mode === 'binary' ? undefined : new StringDecoder(mode === 'utf8' ? 'utf8' : 'utf16le');
  let carry = '';
  let offset = 0;
  let line = 1;
  for (let position = 0, first = true; ; first = false) {
    const block = file.read(position, blockBytes);
    position += block.length;
    const read = block.length;
    let fresh: string;
    if (read === 0) fresh = decoder ? decoder.end() : '';
    else if (mode === 'binary') fresh = printableRuns(block);
    // UTF-16 big-endian: swapped to little-endian pairs (blocks are even-sized, so a pair is never cut; a file's odd last byte is no character).
    else fresh = decoder!.write(mode === 'utf16be' ? Buffer.from(block.subarray(0, block.length & ~1)).swap16() : block);
    const text = carry + fresh;
    if (text.length > carry.length || first) scan.scan(source, { text, offset, line });
    if (read === 0) return position;
    const cut = Math.max(0, text.length - overlapChars);
    for (let i = text.indexOf('\n'); i !== -1 && i < cut; i = text.indexOf('\n', i + 1)) line++;
    offset += cut;
    carry = text.slice(cut);
  }
}

/** Scans a long decoded text (a pickle's strings, an Arrow file's) in blocks with the same overlap as a file's. */
function scanString(text: string, source: SourceRef, scan: ContaminationScan): void {
  let line = 1;
  for (let start = 0; ;) {
    const end = Math.min(text.length, start + blockBytes);
    scan.scan(source, { text: text.slice(start, end), offset: start, line });
    if (end === text.length) return;
    const next = end - overlapChars;
    for (let i = text.indexOf('\n', start); i !== -1 && i < next; i = text.indexOf('\n', i + 1)) line++;
    start = next;
  }
}

/**
 * Whole-in-memory decoding (a pickle's opcodes, an Arrow file's LZ4 buffers) is done up to this size; a larger pickle is
 * read by its printable runs, a larger Arrow file is not read (its compressed buffers would go undecoded).
 */
const maxWholeBytes = 256 * 2 ** 20;

/**
 * Scans one source by what its bytes are (src/integrity/formats.ts): a compressed stream decoded, an archive's members
 * each scanned the same way, a Parquet file's byte-array columns, a pickle's strings, UTF-8 or UTF-16 text, printable
 * runs of anything else. What a decoder refuses is listed as unread with the bytes it takes, never trusted. Returns
 * false when the source itself was not read (what it holds may still be read in part: an archive's other members).
 */
function scanSource(
  file: ByteSource,
  name: string,
  source: SourceRef,
  budget: DecodeBudget,
  nesting: number,
  scan: ContaminationScan,
  coverage: ScanCoverage,
): boolean {
  try {
    const head = file.read(0, sniffBytes);
    const format = sniff(head, name);
    const member = (inner: string) => ({ kind: source.kind, path: `${source.path}:${inner}` });
    const unpack = (members: Member[]) => {
      if (nesting >= maxNesting) throw new UnreadableError(`archives nested more than ${maxNesting} deep: not read`);
      for (const entry of members) {
        coverage.members++;
        let content: ByteSource;
        try {
          content = entry.open();
        } catch (error) {
          if (!(error instanceof UnreadableError)) throw error;
          unread(coverage, member(entry.name), error.message, entry.storedBytes);
          continue;
        }
        scanSource(content, entry.name, member(entry.name), budget, nesting + 1, scan, coverage);
      }
    };
    switch (format) {
      case 'gzip': {
        if (nesting >= maxNesting) throw new UnreadableError(`archives nested more than ${maxNesting} deep: not read`);
        const inner = name.replace(/\.(gz|tgz)$/i, (suffix) => (suffix.toLowerCase() === '.tgz' ? '.tar' : ''));
        coverage.members++;
        scanGzip(file, inner, member('gunzip'), budget, nesting, scan, coverage);
        return true;
      }
      case 'bzip2':
      case 'xz':
      case 'zstd': {
        if (nesting >= maxNesting) throw new UnreadableError(`archives nested more than ${maxNesting} deep: not read`);
        const inner = name.replace(/\.(bz2|xz|zst)$/i, '');
        coverage.members++;
        scanSource(bufferSource(decodeWithCommand(file, format, budget)), inner, member(format), budget, nesting + 1, scan, coverage);
        return true;
      }
      case 'lz4':
      case 'lzma':
        throw new UnreadableError(`an ${format === 'lz4' ? 'LZ4 frame' : 'LZMA'} stream: no decoder here, not read`);
      case 'zlib': {
        if (nesting >= maxNesting) throw new UnreadableError(`archives nested more than ${maxNesting} deep: not read`);
        const decoded = inflateBounded(file, budget);
        if (!decoded) break; // not zlib after all: read as it is, below
        coverage.members++;
        scanSource(bufferSource(decoded), name.replace(/\.(z|zz|zlib)$/i, ''), member('inflate'), budget, nesting + 1, scan, coverage);
        return true;
      }
      case 'zip':
        unpack(zipMembers(file, budget));
        return true;
      case 'tar':
        unpack(tarMembers(file));
        return true;
      case 'parquet':
        try {
          coverage.bytes += scanParquet(file, source, scan, (reason, bytes) => unread(coverage, source, reason, bytes));
        } catch (error) {
          throw new UnreadableError(`Parquet file not read: ${(error as Error).message}`);
        }
        return true;
      case 'arrow':
        if (file.size > maxWholeBytes)
          throw new UnreadableError(
            `an Arrow file over ${maxWholeBytes / 2 ** 20} MiB: its compressed buffers are decoded in memory only below that, not read`,
          );
        scanString(arrowText(file.read(0, file.size), budget), source, scan);
        coverage.binary_bytes += file.size;
        return true;
      case 'pickle':
        if (file.size <= maxWholeBytes) {
          scanString(pickleText(file.read(0, file.size)), source, scan);
          coverage.binary_bytes += file.size;
          return true;
        }
        coverage.binary_bytes += scanBlocks(file, 'binary', source, scan);
        return true;
    }
    const mode = format === 'text' || format === 'utf16le' || format === 'utf16be' ? (format === 'text' ? 'utf8' : format) : 'binary';
    if (mode === 'binary') coverage.binary_bytes += scanBlocks(file, 'binary', source, scan);
    else coverage.bytes += scanBlocks(file, mode, source, scan);
    // Bytes before a zip archive do not hide it (Python's zipfile finds its end records in the tail): its members are read too.
    let embedded;
    try {
      embedded = zipDirectory(file);
    } catch {
      embedded = undefined; // a damaged zip64 record: no archive any reader opens
    }
    if (embedded) unpack(zipMembers(file, budget));
    return true;
  } catch (error) {
    unread(coverage, source, error instanceof UnreadableError ? error.message : `not read: ${(error as Error).message}`, file.size);
    return false;
  }
}

/** The end of a zip archive (its end-of-central-directory record), looked for at the end of a stream too long to hold. */
const zipEndSignature = Buffer.from([0x50, 0x4b, 0x05, 0x06]);
const zipEndBytes = 65_557; // the record (22 bytes) and the longest comment it may carry

/**
 * A gzip stream: decoded whole in memory up to what the budget allows there, then read by what it holds as any file
 * is; past that, where it holds text (or a binary's printable runs), scanned block by block as it decodes, so that an
 * honest `.jsonl.gz` of any size is read whole in bounded memory. Another format that long (an archive, a Parquet
 * file) is read only whole: not read, and a zip archive at the end of a streamed one is named as not read.
 */
function scanGzip(
  file: ByteSource,
  name: string,
  source: SourceRef,
  budget: DecodeBudget,
  nesting: number,
  scan: ContaminationScan,
  coverage: ScanCoverage,
): void {
  const reader = new GunzipReader(file, budget);
  const held: Buffer[] = [];
  const inMemory = Math.max(0, budget.left);
  for (let heldBytes = 0; heldBytes <= inMemory;) {
    const block = reader.readFull(blockBytes);
    if (block.length === 0) {
      const whole = Buffer.concat(held, heldBytes);
      held.length = 0;
      budget.charge(whole.length);
      scanSource(bufferSource(whole), name, source, budget, nesting + 1, scan, coverage);
      return;
    }
    held.push(block);
    heldBytes += block.length;
  }
  const format = sniff(held[0]!.subarray(0, sniffBytes), name);
  if (format !== 'text' && format !== 'utf16le' && format !== 'utf16be' && format !== 'binary') {
    throw new UnreadableError(
      `a gzip stream decoding past ${Math.round(inMemory / 2 ** 20)} MiB to ${format} data, which is read only whole in memory: not read`,
    );
  }
  // Every block but the last is blockBytes long (even: a UTF-16 pair is never cut), as scanBlocks reads them.
  let tail: Buffer = Buffer.alloc(0);
  const stream: ByteSource = {
    size: Number.MAX_SAFE_INTEGER,
    read: (_position, length) => {
      const block = held.shift() ?? reader.readFull(length);
      tail = block.length >= zipEndBytes ? block.subarray(-zipEndBytes) : Buffer.concat([tail, block]).subarray(-zipEndBytes);
      return block;
    },
  };
  const read = scanBlocks(stream, format === 'text' ? 'utf8' : format, source, scan);
  if (format === 'binary') coverage.binary_bytes += read;
  else coverage.bytes += read;
  budget.chargeScan(reader.decoded, 'the gzip stream');
  if (tail.includes(zipEndSignature)) {
    unread(
      coverage,
      source,
      'a zip archive at the end of a gzip stream too long to hold in memory (zip archives are read whole): not read',
      file.size,
    );
  }
}

/**
 * Scans one file of a folder or snapshot: its own expansion allowance, counted as a file read (binary by its format)
 * unless it was not read. `diskBytes` (what it takes on disk, its allocated blocks: a sparse file makes no room) is
 * what it adds to the bytes the unread share is a share of.
 */
function scanTopLevel(
  file: ByteSource,
  name: string,
  source: SourceRef,
  scan: ContaminationScan,
  coverage: ScanCoverage,
  diskBytes = file.size,
): void {
  coverage.source_bytes += diskBytes;
  const binaryBefore = coverage.binary_bytes;
  if (!scanSource(file, name, source, new DecodeBudget(file.size), 0, scan, coverage)) return;
  if (coverage.binary_bytes > binaryBefore) coverage.binary_files++;
  else coverage.files++;
}

/**
 * A name gone (ENOENT, as SafeDir's NOT_FOUND or raw). Any other open error (a folder or file the checker may not open)
 * hides what it holds unsized: the walk counts as cut.
 */
const notFound = (error: unknown) => ['ENOENT', 'NOT_FOUND'].includes(String((error as { code?: unknown }).code));

/**
 * Walks a folder through handles (src/util/safe-fs.ts: every name opened from its folder's descriptor, no link
 * followed, as every server access to a workspace), scanning each regular file. Folders are walked from a list of
 * paths, each opened from the root when its turn comes, so any depth is walked with one descriptor open at a time.
 */
function scanFolder(root: SafeDir, kind: SourceRef['kind'], prefix: string, scan: ContaminationScan, coverage: ScanCoverage): void {
  let entries = 0;
  const pending: string[][] = [[]];
  while (pending.length > 0) {
    const parts = pending.pop()!;
    const at = parts.join('/');
    let dir: SafeDir;
    try {
      dir = parts.length === 0 ? root : root.openDir(parts);
    } catch (error) {
      // `chmod 100` on a folder hides it from a checker that is not root while a job still opens its files by name.
      if (!notFound(error)) coverage.walk_cut = true;
      unread(
        coverage,
        { kind, path: `${prefix}${at}` },
        `${notFound(error) ? 'changed during the check' : 'could not be opened'}: ${(error as Error).message}`,
      );
      continue;
    }
    try {
      const listed = dir.list(maxEntries - entries);
      // What lies past these is not even sized: the share unread is then unknown, counted as all (`walk_cut`).
      if (listed.truncated) unread(coverage, { kind, path: at || '.' }, `more than ${maxEntries} entries: the rest not read`);
      if (listed.unspellable > 0) unread(coverage, { kind, path: at || '.' }, `${listed.unspellable} names that are not UTF-8: not read`);
      if (listed.truncated || listed.unspellable > 0) coverage.walk_cut = true;
      for (const name of listed.names) {
        entries++;
        const path = at ? `${at}/${name}` : name;
        const source = { kind, path: `${prefix}${path}` };
        const stats = dir.lstat(name);
        if (!stats) continue;
        if (stats.isDirectory()) {
          pending.push([...parts, name]);
          continue;
        }
        if (!stats.isFile()) continue; // links are never followed; what they point at is scanned where it lies
        let fd: number;
        try {
          fd = dir.openFile(name, path);
        } catch (error) {
          if (!notFound(error)) coverage.walk_cut = true;
          coverage.source_bytes += stats.blocks * 512;
          unread(coverage, source, `could not be opened: ${(error as Error).message}`, stats.size);
          continue;
        }
        try {
          scanTopLevel(fileSource(fd), name, source, scan, coverage, Math.min(stats.size, stats.blocks * 512));
        } finally {
          closeSync(fd);
        }
      }
    } finally {
      if (dir !== root) dir.close();
    }
  }
}

/** Tools whose command line is scanned like a file: a heredoc in it can write items that a job reads, then deletes. */
const commandTools = new Set(['exec', 'run_training']);

/**
 * Scans everything of a run the agent could train from: its workspace (every file, whatever the folder or format:
 * code, data, archives, outputs, rollouts), every code snapshot, every submitted folder, every write_file call's
 * content and every exec and run_training command line. Stored objects shared by several snapshots are read once.
 */
export function scanRunSources(store: Store, home: string, run: RunRow, scan: ContaminationScan): ScanCoverage {
  const coverage = emptyCoverage();
  try {
    // An ended run's workspace filesystem is mounted read-only for the scan (sandbox/run-storage.ts).
    withWorkspaceReadable(run.dir, (workspace) =>
      SafeDir.withTrusted(workspace, (root) => {
        // Fail closed: an empty mount point read as the workspace would make a clean verdict of nothing.
        requireWorkspaceFilesystem(run.dir, root.fd);
        scanFolder(root, 'workspace', '', scan, coverage);
      }),
    );
  } catch (error) {
    // Not read at all, so not sized either: all of it is unread.
    unread(coverage, { kind: 'workspace', path: '.' }, `the workspace could not be opened: ${(error as Error).message}`);
    coverage.walk_cut = true;
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
      if (!notFound(error)) coverage.walk_cut = true; // not sized: what it held is unknown
      continue;
    }
    for (const file of files) {
      if (seenObjects.has(file.sha256)) continue;
      seenObjects.add(file.sha256);
      scanTopLevel(
        bufferSource(snapshots.readFile(file)),
        file.path,
        { kind: 'code_snapshot', path: `${tree.slice(0, 12)}:code/${file.path}` },
        scan,
        coverage,
      );
    }
  }

  for (const submission of store.listSubmissions(run.id)) {
    coverage.submissions++;
    const folder = join(home, 'submissions', submission.content_hash);
    try {
      SafeDir.withTrusted(folder, (root) => scanFolder(root, 'submission', `sub-${submission.seq ?? submission.id}:`, scan, coverage));
    } catch (error) {
      unread(coverage, { kind: 'submission', path: `sub-${submission.seq ?? submission.id}` }, `not stored: ${(error as Error).message}`);
      if (!notFound(error)) coverage.walk_cut = true; // not sized: what it held is unknown
    }
  }

  const tools = store.listEvents(run.id, 'tool');
  tools.forEach((event) => {
    if (!commandTools.has(event.name) && event.name !== 'write_file') return;
    const args = (JSON.parse(event.data) as { arguments?: { path?: unknown; content?: unknown; command?: unknown } }).arguments;
    if (event.name === 'write_file') {
      if (typeof args?.content !== 'string') return;
      coverage.write_file_calls++;
      scanText(args.content, { kind: 'write_file', path: `event ${event.id}: ${String(args.path)}` }, scan, coverage);
      return;
    }
    if (typeof args?.command !== 'string') return;
    coverage.command_lines++;
    scanText(args.command, { kind: 'command', path: `event ${event.id}: ${event.name}` }, scan, coverage);
  });
  coverage.unread_share = coverage.walk_cut
    ? 1
    : coverage.source_bytes > 0
      ? Math.min(1, coverage.unread_bytes / coverage.source_bytes)
      : Math.min(1, coverage.unread_bytes);
  return coverage;
}
