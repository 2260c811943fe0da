import { open } from 'node:fs/promises';

/**
 * Bounded, asynchronous reads of job logs (on libuv's thread pool, never blocking the event loop); the training curve
 * in them is read by src/reports/metrics.ts.
 */

/** Most of a log one push (or a page) reads: a log that grows faster is shown from its newest part. */
export const maxPushBytes = 16 * 1024;
/** Most of a log a page reads for its training curve. */
export const curveBytes = 256 * 1024;

export interface LogChunk {
  /** Whole lines only, unless `final`: a line still being written is left for the next read. */
  text: string;
  /** Where the next read starts. */
  next: number;
  /** Bytes passed over because more than `maxBytes` had arrived. */
  skipped: number;
}

/**
 * What the log holds from `offset` on, at most `maxBytes` of it (its newest part), up to its last newline unless
 * `final` (the job ended). A log that is shorter than `offset` was started over: it is read from its start.
 */
export async function readLogFrom(path: string, offset: number, maxBytes: number, final: boolean): Promise<LogChunk> {
  let file;
  try {
    file = await open(path, 'r');
  } catch {
    return { text: '', next: offset, skipped: 0 };
  }
  try {
    const { size } = await file.stat();
    const from = size < offset ? 0 : offset;
    const start = Math.max(from, size - maxBytes);
    if (start >= size) return { text: '', next: size, skipped: 0 };
    const buffer = Buffer.alloc(size - start);
    const { bytesRead } = await file.read(buffer, 0, buffer.length, start);
    let text = buffer.subarray(0, bytesRead).toString('utf8');
    let next = start + bytesRead;
    if (!final) {
      const lastNewline = text.lastIndexOf('\n');
      next = start + Buffer.byteLength(text.slice(0, lastNewline + 1));
      text = text.slice(0, lastNewline + 1);
    }
    // Started mid-line after a skip: the partial first line would read as garbage.
    if (start > from) text = text.slice(text.indexOf('\n') + 1);
    return { text, next, skipped: start - from };
  } finally {
    await file.close();
  }
}

/** The newest whole lines of `text` within `maxBytes`, and whether older ones were left out. */
export function newestLines(text: string, maxBytes: number): { text: string; cut: boolean } {
  const bytes = Buffer.from(text);
  if (bytes.length <= maxBytes) return { text, cut: false };
  const newest = bytes.subarray(bytes.length - maxBytes).toString('utf8');
  return { text: newest.slice(newest.indexOf('\n') + 1), cut: true };
}
