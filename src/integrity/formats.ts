import { spawnSync } from 'node:child_process';
import { fstatSync } from 'node:fs';
import * as zlib from 'node:zlib';
import { Gunzip } from 'fflate';
import { readAt } from '../util/safe-fs.js';

/**
 * The file formats the contamination check unpacks (src/integrity/sources.ts walks them): compressed streams, zip and
 * tar members, pickles' string constants, UTF-16 text and printable runs of any other binary. Every decoder is bounded
 * by what the bytes it was given can hold: an expansion past `maxExpansion` times the on-disk file's size (or
 * `maxDecodedBytes`) is refused, never trusted, and the caller lists the file as not read.
 */

/** Bytes read at an offset: an open file (read on demand, never whole) or bytes already in memory (a decoded member). */
export interface ByteSource {
  size: number;
  read(position: number, length: number): Buffer;
}

export function fileSource(fd: number): ByteSource {
  return { size: fstatSync(fd).size, read: (position, length) => readAt(fd, position, length) };
}

export function bufferSource(bytes: Buffer): ByteSource {
  return { size: bytes.length, read: (position, length) => bytes.subarray(position, position + length) };
}

/** A range of another source (a stored zip member, a tar member): no copy. */
function rangeSource(of: ByteSource, start: number, size: number): ByteSource {
  return { size, read: (position, length) => of.read(start + position, Math.max(0, Math.min(length, size - position))) };
}

/**
 * How far one file on disk may expand, all its decoded streams and members together: 256 times its size (text
 * compresses 3-20 times, templated JSONL under 100; deflate's own limit is 1032), and 512 MiB at most (what is decoded
 * is held in memory).
 */
export const maxExpansion = 256;
export const maxDecodedBytes = 512 * 2 ** 20;
/** Archives inside archives (a .tar.gz in a zip…) are unpacked this deep. */
export const maxNesting = 8;

/** What is left of one on-disk file's expansion allowance. */
export class DecodeBudget {
  left: number;
  /** Stored members (ranges of the archive, not held in memory) scanned: overlapping or nested ones would otherwise cost entries^depth. */
  scanLeft: number;
  constructor(readonly fileBytes: number) {
    this.left = Math.min(maxDecodedBytes, Math.max(fileBytes, 1) * maxExpansion);
    this.scanLeft = Math.max(fileBytes, 1) * maxExpansion;
  }
  get limitText(): string {
    return `${maxExpansion}× its ${this.fileBytes} bytes on disk, ${maxDecodedBytes / 2 ** 20} MiB at most`;
  }
  /** Refuses `bytes` more than what is left, before anything is allocated. */
  reserve(bytes: number, what: string): void {
    if (bytes > this.left)
      throw new UnreadableError(`${what} declares ${bytes} bytes, past what it may expand to (${this.limitText}): not read`);
  }
  /** Refuses a stream declaring more than may be scanned (`maxExpansion` times the file's size), before it is decoded. */
  reserveScan(bytes: number, what: string): void {
    if (bytes > this.scanLeft)
      throw new UnreadableError(
        `${what} declares ${bytes} bytes, past what it may expand to (${maxExpansion}× its ${this.fileBytes} bytes on disk): not read`,
      );
  }
  charge(bytes: number): void {
    this.left -= bytes;
  }
  /** Charges a stored member's bytes to what may be scanned, refusing it past `maxExpansion` times the file's size. */
  chargeScan(bytes: number, what: string): void {
    if (bytes > this.scanLeft)
      throw new UnreadableError(
        `${what} of ${bytes} bytes would make the scan read past ${maxExpansion}× its ${this.fileBytes} bytes on disk: not read`,
      );
    this.scanLeft -= bytes;
  }
}

/** A file or member the check refuses to decode (its declared sizes are not believable, or it has no decoder here). */
export class UnreadableError extends Error {}

export type Format =
  | 'arrow'
  | 'gzip'
  | 'zlib'
  | 'bzip2'
  | 'xz'
  | 'zstd'
  | 'lz4'
  | 'lzma'
  | 'zip'
  | 'tar'
  | 'parquet'
  | 'pickle'
  | 'utf16le'
  | 'utf16be'
  | 'text'
  | 'binary';

const startsWith = (head: Buffer, bytes: number[]) => bytes.every((byte, i) => head[i] === byte);

/** A file's format from its first bytes, whatever its name; the name only tells a pickle of protocol 0 or 1. */
export function sniff(head: Buffer, name: string): Format {
  if (startsWith(head, [0x1f, 0x8b])) return 'gzip';
  if (startsWith(head, [0x42, 0x5a, 0x68])) return 'bzip2';
  if (startsWith(head, [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])) return 'xz';
  if (startsWith(head, [0x28, 0xb5, 0x2f, 0xfd])) return 'zstd';
  if (startsWith(head, [0x04, 0x22, 0x4d, 0x18])) return 'lz4';
  if (startsWith(head, [0x5d, 0x00, 0x00])) return 'lzma'; // .lzma (LZMA-alone): its usual properties byte and dictionary size
  // A zlib header (RFC 1950): deflate, a compression level, and a check that makes the pair a multiple of 31.
  if (head[0] === 0x78 && [0x01, 0x5e, 0x9c, 0xda].includes(head[1]!)) return 'zlib';
  if (startsWith(head, [0x50, 0x4b, 0x03, 0x04]) || startsWith(head, [0x50, 0x4b, 0x05, 0x06])) return 'zip';
  if (head.length >= 262 && head.toString('latin1', 257, 262) === 'ustar') return 'tar';
  if (startsWith(head, [0x50, 0x41, 0x52, 0x31])) return 'parquet'; // its footer is checked as it is read: one cut short is named
  if (head.toString('latin1', 0, 6) === 'ARROW1' || /\.(arrow|feather)$/i.test(name)) return 'arrow';
  if (head[0] === 0x80 && head[1]! >= 2 && head[1]! <= 5) return 'pickle';
  if (/\.(pkl|pickle)$/i.test(name)) return 'pickle';
  if (startsWith(head, [0xff, 0xfe])) return 'utf16le';
  if (startsWith(head, [0xfe, 0xff])) return 'utf16be';
  if (!head.includes(0)) return 'text';
  return utf16WithoutMark(head) ?? 'binary';
}

/** UTF-16 without a byte-order mark: mostly-ASCII text has a NUL in nearly every other byte, on one side only. */
function utf16WithoutMark(head: Buffer): 'utf16le' | 'utf16be' | undefined {
  const pairs = head.length >> 1;
  if (pairs < 8) return undefined;
  let evenNul = 0;
  let oddNul = 0;
  for (let i = 0; i + 1 < head.length; i += 2) {
    if (head[i] === 0) evenNul++;
    if (head[i + 1] === 0) oddNul++;
  }
  if (oddNul > pairs * 0.6 && evenNul < pairs * 0.05) return 'utf16le';
  if (evenNul > pairs * 0.6 && oddNul < pairs * 0.05) return 'utf16be';
  return undefined;
}

/** Compressed bytes given to the gzip decoder at a time: what one push may inflate to stays small (deflate: 1032 times). */
const gzipInputBytes = 64 * 2 ** 10;

/**
 * A gzip stream (every member of it) decoded as it is read, synchronously (fflate's streaming Gunzip): the check holds
 * no more of it than its caller keeps. Its size field (the last member's, modulo 4 GiB) is checked first, then what it
 * decodes, as it decodes, against `maxExpansion` times the file's size (the budget's scan allowance): a bomb is refused
 * as it expands, whatever it declares.
 */
export class GunzipReader {
  private readonly gunzip: Gunzip;
  private readonly pending: Buffer[] = [];
  private inputAt = 0;
  private ended = false;
  private readonly allowance: number;
  /** Bytes decoded so far. */
  decoded = 0;

  constructor(
    private readonly source: ByteSource,
    budget: DecodeBudget,
  ) {
    if (source.size >= 18) budget.reserveScan(source.read(source.size - 4, 4).readUInt32LE(0), 'the gzip stream');
    this.allowance = budget.scanLeft;
    this.gunzip = new Gunzip((chunk, final) => {
      this.decoded += chunk.length;
      if (this.decoded > this.allowance)
        throw new UnreadableError(
          `the gzip stream expands past what it may (${maxExpansion}× its ${budget.fileBytes} bytes on disk): not read`,
        );
      if (chunk.length > 0) this.pending.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
      if (final) this.ended = true;
    });
  }

  /** The next decoded bytes, at most `max` of them; empty once the stream has ended. */
  read(max: number): Buffer {
    while (this.pending.length === 0 && !this.ended) this.feed();
    const first = this.pending[0];
    if (!first) return Buffer.alloc(0);
    if (first.length <= max) return this.pending.shift()!;
    this.pending[0] = first.subarray(max);
    return first.subarray(0, max);
  }

  /** The next `max` decoded bytes, fewer only at the stream's end. */
  readFull(max: number): Buffer {
    const parts: Buffer[] = [];
    let bytes = 0;
    for (let part = this.read(max); part.length > 0; part = bytes < max ? this.read(max - bytes) : Buffer.alloc(0)) {
      parts.push(part);
      bytes += part.length;
    }
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts, bytes);
  }

  private feed(): void {
    if (this.inputAt >= this.source.size) throw new UnreadableError('the gzip stream is damaged (it ends inside a member): not read');
    const piece = this.source.read(this.inputAt, gzipInputBytes);
    this.inputAt += piece.length;
    try {
      this.gunzip.push(piece, this.inputAt >= this.source.size);
    } catch (error) {
      if (error instanceof UnreadableError) throw error;
      throw new UnreadableError(`the gzip stream is damaged (${(error as Error).message}): not read`);
    }
  }
}

/**
 * A zlib stream (RFC 1950) decoded within the budget; one cut short gives what it holds. Undefined when the bytes only
 * look like a zlib header (a text starting with `x^`): the caller reads them as they are.
 */
export function inflateBounded(source: ByteSource, budget: DecodeBudget): Buffer | undefined {
  if (source.size > maxDecodedBytes)
    throw new UnreadableError(
      `a zlib stream of ${source.size} bytes, over the ${maxDecodedBytes / 2 ** 20} MiB decoded in memory: not read`,
    );
  let decoded: Buffer;
  try {
    decoded = zlib.inflateSync(source.read(0, source.size), {
      maxOutputLength: Math.max(1, budget.left),
      finishFlush: zlib.constants.Z_SYNC_FLUSH,
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError)
      throw new UnreadableError(`the zlib stream expands past what it may (${budget.limitText}): not read`);
    return undefined;
  }
  budget.charge(decoded.length);
  return decoded;
}

/**
 * An xz, bzip2 or zstd stream decoded by the system's own command in a child process (the check runs in its own
 * process: src/integrity/check-process.ts), its output capped by the budget; no command here: not read.
 */
export function decodeWithCommand(source: ByteSource, format: 'xz' | 'bzip2' | 'zstd', budget: DecodeBudget): Buffer {
  if (source.size > maxDecodedBytes)
    throw new UnreadableError(
      `a ${format} stream of ${source.size} bytes, over the ${maxDecodedBytes / 2 ** 20} MiB decoded in memory: not read`,
    );
  const ran = spawnSync(format, ['-dc'], { input: source.read(0, source.size), maxBuffer: Math.max(1, budget.left) });
  const code = (ran.error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOBUFS') throw new UnreadableError(`the ${format} stream expands past what it may (${budget.limitText}): not read`);
  if (code === 'ENOENT') throw new UnreadableError(`a ${format} stream: no \`${format}\` command here to decode it, not read`);
  if (ran.error || ran.status !== 0)
    throw new UnreadableError(`the ${format} stream is damaged (${ran.error?.message ?? ran.stderr.toString().trim()}): not read`);
  budget.charge(ran.stdout.length);
  return ran.stdout;
}

export interface Member {
  name: string;
  /** Bytes the member takes in its archive (what an unread member counts for). */
  storedBytes: number;
  /** Its content, or why it is not read. */
  open(): ByteSource;
}

const zipMethods: Record<number, string> = { 12: 'bzip2', 14: 'LZMA', 93: 'zstd', 95: 'xz', 99: 'AES-encrypted' };

/**
 * A zip archive's end records, found in its tail as Python's zipfile finds them: the offsets it declares are corrected
 * by `prepended`, the bytes before the archive (a zip appended to a script or any file still opens). Undefined when
 * the tail holds no end record whose central directory is where it says.
 */
export function zipDirectory(
  source: ByteSource,
): { entries: number; directorySize: number; directoryOffset: number; prepended: number } | undefined {
  const tailLength = Math.min(source.size, 22 + 0xffff);
  const tail = source.read(source.size - tailLength, tailLength);
  const end = tail.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0 || end + 22 > tail.length) return undefined;
  let entries = tail.readUInt16LE(end + 10);
  let directorySize = tail.readUInt32LE(end + 12);
  let directoryOffset = tail.readUInt32LE(end + 16);
  /** Where the directory lies: just before the end records. */
  let directoryEnd = source.size - tailLength + end;
  const locator = end - 20;
  if (locator >= 0 && tail.readUInt32LE(locator) === 0x07064b50) {
    const record = source.read(directoryEnd - 20 - 56, 56);
    if (record.length < 56 || record.readUInt32LE(0) !== 0x06064b50)
      throw new UnreadableError('a zip64 archive whose directory record is damaged: not read');
    entries = Number(record.readBigUInt64LE(32));
    directorySize = Number(record.readBigUInt64LE(40));
    directoryOffset = Number(record.readBigUInt64LE(48));
    directoryEnd -= 20 + 56;
  }
  const prepended = directoryEnd - directorySize - directoryOffset;
  if (prepended < 0) return undefined;
  const signature = source.read(directoryOffset + prepended, 4);
  if (entries > 0 && (signature.length < 4 || signature.readUInt32LE(0) !== 0x02014b50)) return undefined;
  return { entries, directorySize, directoryOffset: directoryOffset + prepended, prepended };
}

/** A zip archive's members, from its central directory (zip64 included); each member's bytes are read when opened. */
export function zipMembers(source: ByteSource, budget: DecodeBudget): Member[] {
  const found = zipDirectory(source);
  if (!found) throw new UnreadableError('a zip archive without its central directory (cut short?): not read');
  const { entries, directorySize, directoryOffset, prepended } = found;
  if (directoryOffset + directorySize > source.size) throw new UnreadableError('a zip archive whose directory lies outside it: not read');
  // Each entry takes at least 46 bytes: a count past what the directory holds is not believed.
  if (entries * 46 > directorySize)
    throw new UnreadableError(`a zip archive declaring ${entries} entries in a ${directorySize}-byte directory: not read`);
  const directory = source.read(directoryOffset, directorySize);
  const members: Member[] = [];
  for (let at = 0, n = 0; n < entries; n++) {
    if (at + 46 > directory.length || directory.readUInt32LE(at) !== 0x02014b50)
      throw new UnreadableError('a zip archive whose directory is damaged: not read');
    const flags = directory.readUInt16LE(at + 8);
    const method = directory.readUInt16LE(at + 10);
    let storedBytes = directory.readUInt32LE(at + 20);
    let size = directory.readUInt32LE(at + 24);
    const nameLength = directory.readUInt16LE(at + 28);
    const extraLength = directory.readUInt16LE(at + 30);
    const commentLength = directory.readUInt16LE(at + 32);
    let localOffset: number = directory.readUInt32LE(at + 42);
    const name = directory.toString('utf8', at + 46, at + 46 + nameLength);
    // zip64: the sizes and offset marked 0xFFFFFFFF are in the extra field 0x0001, in this order.
    for (let e = at + 46 + nameLength; e + 4 <= at + 46 + nameLength + extraLength;) {
      const id = directory.readUInt16LE(e);
      const length = directory.readUInt16LE(e + 2);
      if (id === 0x0001) {
        let field = e + 4;
        const next = () => (field + 8 <= e + 4 + length ? Number(directory.readBigUInt64LE((field += 8) - 8)) : undefined);
        if (size === 0xffffffff) size = next() ?? size;
        if (storedBytes === 0xffffffff) storedBytes = next() ?? storedBytes;
        if (localOffset === 0xffffffff) localOffset = next() ?? localOffset;
      }
      e += 4 + length;
    }
    at += 46 + nameLength + extraLength + commentLength;
    if (name.endsWith('/')) continue;
    members.push({
      name,
      storedBytes,
      open: () => {
        if (flags & 1 || method === 99) throw new UnreadableError('an encrypted zip member: not read');
        const local = source.read(localOffset + prepended, 30);
        if (local.length < 30 || local.readUInt32LE(0) !== 0x04034b50)
          throw new UnreadableError('a zip member whose header is damaged: not read');
        const start = localOffset + prepended + 30 + local.readUInt16LE(26) + local.readUInt16LE(28);
        if (start + storedBytes > source.size) throw new UnreadableError('a zip member that lies outside its archive: not read');
        if (method === 0) {
          budget.chargeScan(storedBytes, 'a stored zip member');
          return rangeSource(source, start, storedBytes);
        }
        if (method !== 8)
          throw new UnreadableError(`a zip member compressed with ${zipMethods[method] ?? `method ${method}`}: no decoder here, not read`);
        budget.reserve(size, 'a zip member');
        let decoded: Buffer;
        try {
          // The declared size bounds the output: a member that inflates past it is a lie, refused.
          decoded = zlib.inflateRawSync(source.read(start, storedBytes), { maxOutputLength: Math.max(1, size) });
        } catch (error) {
          throw new UnreadableError(
            `a zip member that does not inflate to its declared ${size} bytes (${(error as Error).message}): not read`,
          );
        }
        budget.charge(decoded.length);
        return bufferSource(decoded);
      },
    });
  }
  return members;
}

/** A tar archive's regular members (ustar, GNU long names, pax paths); their bytes are ranges of the archive. */
export function tarMembers(source: ByteSource): Member[] {
  const members: Member[] = [];
  let longName: string | undefined;
  for (let at = 0; at + 512 <= source.size;) {
    const header = source.read(at, 512);
    if (header.every((byte) => byte === 0)) break;
    const field = (from: number, length: number) => {
      const text = header.toString('utf8', from, from + length);
      const nul = text.indexOf('\0');
      return nul < 0 ? text : text.slice(0, nul);
    };
    // Sizes are octal text, or base-256 with the high bit set (GNU, for members of 8 GiB and more).
    const size =
      header[124]! & 0x80
        ? header.subarray(125, 136).reduce((value, byte) => value * 256 + byte, 0)
        : parseInt(field(124, 12).trim() || '0', 8);
    if (!Number.isFinite(size) || size < 0) throw new UnreadableError('a tar archive with a damaged header: not read');
    const type = String.fromCharCode(header[156]!);
    const start = at + 512;
    if (start + size > source.size) throw new UnreadableError(`a tar member that runs past the archive's end: not read`);
    const prefix = header.toString('latin1', 257, 262) === 'ustar' ? field(345, 155) : '';
    const name = longName ?? (prefix ? `${prefix}/${field(0, 100)}` : field(0, 100));
    longName = undefined;
    if (type === 'L') longName = source.read(start, Math.min(size, 4096)).toString('utf8').replace(/\0.*$/s, '');
    else if (type === 'x') longName = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(source.read(start, Math.min(size, 65536)).toString('utf8'))?.[1];
    else if (type === '0' || type === '\0' || type === '7')
      members.push({ name, storedBytes: size, open: () => rangeSource(source, start, size) });
    at = start + Math.ceil(size / 512) * 512;
  }
  return members;
}

/** Pickle opcodes whose argument is a length-prefixed string or bytes: the length's width in bytes. */
const pickleStrings: Record<number, number> = {
  0x8c: 1, // SHORT_BINUNICODE
  0x58: 4, // BINUNICODE
  0x8d: 8, // BINUNICODE8
  0x55: 1, // SHORT_BINSTRING
  0x54: 4, // BINSTRING
  0x43: 1, // SHORT_BINBYTES
  0x42: 4, // BINBYTES
  0x8e: 8, // BINBYTES8
  0x96: 8, // BYTEARRAY8
};
/** The other opcodes' fixed argument widths; `-1`: an argument up to a newline, `-2`: two such lines. */
const pickleArguments: Record<number, number> = {
  0x80: 1,
  0x4b: 1,
  0x68: 1,
  0x71: 1,
  0x82: 1, // PROTO BININT1 BINGET BINPUT EXT1
  0x4d: 2,
  0x83: 2, // BININT2 EXT2
  0x4a: 4,
  0x6a: 4,
  0x72: 4,
  0x84: 4, // BININT LONG_BINGET LONG_BINPUT EXT4
  0x95: 8,
  0x47: 8, // FRAME BINFLOAT
  0x8a: -3,
  0x8b: -4, // LONG1, LONG4: length-prefixed, skipped
  0x49: -1,
  0x4c: -1,
  0x46: -1,
  0x53: -1,
  0x56: -1,
  0x67: -1,
  0x70: -1,
  0x50: -1, // INT LONG FLOAT STRING UNICODE GET PUT PERSID
  0x63: -2,
  0x69: -2, // GLOBAL INST
};
const pickleNoArgument = new Set([
  0x28, 0x2e, 0x30, 0x31, 0x32, 0x4e, 0x51, 0x52, 0x61, 0x62, 0x64, 0x7d, 0x65, 0x6c, 0x5d, 0x6f, 0x73, 0x74, 0x29, 0x75, 0x81, 0x85, 0x86,
  0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98,
]);

/**
 * A pickle's string constants, one a line, read by walking its opcodes (nothing is unpickled: no code runs); several
 * pickles one after another are all read. Line arguments of protocol 0 (a repr or raw-unicode-escape string) are kept
 * as they are: the tokeniser reads their escapes. The whole pickle's printable runs are read too: what the walk skips
 * (a LONG1/LONG4 integer's bytes: `pickle.dumps(int.from_bytes(text))` holds a file), cuts (a length past the end) or
 * stops at (an opcode not known) is still read.
 */
export function pickleText(bytes: Buffer): string {
  const lines: string[] = [];
  let at = 0;
  while (at < bytes.length) {
    const op = bytes[at]!;
    const width = pickleStrings[op];
    if (width !== undefined) {
      if (at + 1 + width > bytes.length) break;
      const length = width === 1 ? bytes[at + 1]! : width === 4 ? bytes.readUInt32LE(at + 1) : Number(bytes.readBigUInt64LE(at + 1));
      const start = at + 1 + width;
      if (start + length > bytes.length) break;
      lines.push(bytes.toString('utf8', start, start + length));
      at = start + length;
      continue;
    }
    const argument = pickleArguments[op];
    if (argument === undefined && !pickleNoArgument.has(op)) break;
    if (argument === undefined) at += 1;
    else if (argument > 0) at += 1 + argument;
    else if (argument === -3 || argument === -4) {
      const w = argument === -3 ? 1 : 4;
      if (at + 1 + w > bytes.length) break;
      at += 1 + w + (w === 1 ? bytes[at + 1]! : bytes.readUInt32LE(at + 1));
    } else {
      let end = at + 1;
      for (let lineCount = argument === -1 ? 1 : 2; lineCount > 0 && end < bytes.length; lineCount--) {
        const newline = bytes.indexOf(0x0a, end);
        end = newline < 0 ? bytes.length : newline + 1;
      }
      lines.push(bytes.toString('utf8', at + 1, end));
      at = end;
    }
  }
  lines.push(printableRuns(bytes));
  return lines.join('\n');
}

/** A run of printable characters shorter than this is dropped: a hidden item's text is at least 8 tokens. */
const minRunBytes = 12;

/**
 * The printable runs of a binary block, like `strings`: ASCII letters, digits, punctuation and whitespace, and valid
 * UTF-8 sequences, each run of `minRunBytes` or more on a line of its own; the rest is dropped. A run touching the
 * block's start or end is kept whatever its length and not cut from the block's edge, so that blocks read one after
 * another join it whole. One pass over the bytes, and only the runs are decoded: a checkpoint's gigabytes of weights
 * cost a scan, not a string.
 */
export function printableRuns(buffer: Buffer): string {
  // A plain byte view: indexing a Buffer subclass in this hot loop is several times slower.
  const block = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.length);
  const parts: Uint8Array[] = [];
  const newline = Buffer.from('\n');
  const length = block.length;
  let runStart = 0;
  for (let i = 0; i < length;) {
    const byte = block[i]!;
    if ((byte >= 0x20 && byte < 0x7f) || byte === 0x09 || byte === 0x0a || byte === 0x0d) {
      i++;
      continue;
    }
    if (byte >= 0xc2 && byte <= 0xf4) {
      const width = byte <= 0xdf ? 2 : byte <= 0xef ? 3 : 4;
      let valid = i + width <= length;
      for (let k = 1; valid && k < width; k++) valid = (block[i + k]! & 0xc0) === 0x80;
      if (valid) {
        i += width;
        continue;
      }
    }
    if (i - runStart >= minRunBytes || (runStart === 0 && i > 0)) parts.push(block.subarray(runStart, i), newline);
    else if (runStart === 0) parts.push(newline);
    runStart = ++i;
  }
  parts.push(block.subarray(runStart, length));
  return Buffer.concat(parts).toString('utf8');
}

const lz4Magic = Buffer.from([0x04, 0x22, 0x4d, 0x18]);
const zstdMagic = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);

/**
 * An Arrow IPC file's text (Feather v2 is one): its buffers' printable runs, strings being stored whole in them; a
 * buffer compressed with LZ4 (pyarrow's Feather default) is decoded first, each frame's size (the 8 bytes before it,
 * as Arrow stores it) reserved in the budget. A zstd-compressed buffer has no decoder here: refused.
 */
export function arrowText(bytes: Buffer, budget: DecodeBudget): string {
  const parts = [printableRuns(bytes)];
  for (let at = bytes.indexOf(lz4Magic, 8); at !== -1; at = bytes.indexOf(lz4Magic, at + 4)) {
    const declared = Number(bytes.readBigInt64LE(at - 8));
    if (declared < 0 || declared > bytes.length * maxExpansion) continue; // not a buffer's frame: magic bytes by chance
    budget.reserve(declared, 'an LZ4-compressed Arrow buffer');
    const decoded = lz4Frame(bytes, at, declared);
    budget.charge(decoded.length);
    parts.push(printableRuns(decoded));
  }
  const zstd = bytes.indexOf(zstdMagic, 8);
  if (zstd !== -1 && Number(bytes.readBigInt64LE(zstd - 8)) >= 0 && Number(bytes.readBigInt64LE(zstd - 8)) <= bytes.length * maxExpansion)
    throw new UnreadableError('an Arrow file with zstd-compressed buffers: no decoder here, not read');
  return parts.join('\n');
}

/** One LZ4 frame at `at`, decoded into at most `maxBytes` (its blocks' declared sizes and matches are checked). */
function lz4Frame(bytes: Buffer, at: number, maxBytes: number): Buffer {
  const out = Buffer.alloc(maxBytes);
  let length = 0;
  const flags = bytes[at + 4]!;
  let position = at + 7 + (flags & 0x08 ? 8 : 0) + (flags & 0x01 ? 4 : 0);
  const damaged = () => new UnreadableError('an LZ4 frame that is damaged or expands past its declared size: not read');
  for (;;) {
    if (position + 4 > bytes.length) throw damaged();
    const header = bytes.readUInt32LE(position);
    position += 4;
    if (header === 0) break;
    const size = header & 0x7fffffff;
    const end = position + size;
    if (end > bytes.length) throw damaged();
    if (header & 0x80000000) {
      if (length + size > maxBytes) throw damaged();
      bytes.copy(out, length, position, end);
      length += size;
    } else {
      // An LZ4 block: sequences of literals, then a match (offset, length) copied from what is already out.
      for (let i = position; i < end;) {
        const token = bytes[i++]!;
        let literals = token >> 4;
        if (literals === 15) for (let more = 255; more === 255 && i < end; literals += more) more = bytes[i++]!;
        if (i + literals > end || length + literals > maxBytes) throw damaged();
        bytes.copy(out, length, i, i + literals);
        length += literals;
        i += literals;
        if (i >= end) break;
        const offset = bytes.readUInt16LE(i);
        i += 2;
        let match = (token & 15) + 4;
        if ((token & 15) === 15) for (let more = 255; more === 255 && i < end; match += more) more = bytes[i++]!;
        if (offset === 0 || offset > length || length + match > maxBytes) throw damaged();
        for (let k = 0; k < match; k++, length++) out[length] = out[length - offset]!;
      }
    }
    position = end + (flags & 0x10 ? 4 : 0);
  }
  return out.subarray(0, length);
}
