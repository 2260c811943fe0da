import { closeSync, openSync, readSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

/** A transcript as text, or as its lines (a file read a chunk at a time: `fileLines`). */
export type TranscriptText = string | Iterable<string>;

/**
 * The longest line a transcript file is read with: a longer one (a tool result of tens of MB) is skipped rather than
 * joined, so that no transcript, however an agent filled it, builds a string near what V8 can hold (512 Mi).
 */
const maxLineChars = 16 * 2 ** 20;
const chunkBytes = 2 ** 20;

/** The lines of a text, without splitting it into an array first. */
function* linesOf(text: string): Generator<string> {
  let start = 0;
  while (start <= text.length) {
    const end = text.indexOf('\n', start);
    yield text.slice(start, end === -1 ? undefined : end);
    if (end === -1) return;
    start = end + 1;
  }
}

/** The lines of a file, read a chunk at a time (a transcript may be larger than one string can hold); see `maxLineChars`. */
export function* fileLines(path: string): Generator<string> {
  const fd = openSync(path, 'r');
  try {
    const decoder = new StringDecoder('utf8');
    const buffer = Buffer.alloc(chunkBytes);
    let partial = '';
    let skipping = false;
    for (;;) {
      const read = readSync(fd, buffer, 0, chunkBytes, null);
      const text = read > 0 ? decoder.write(buffer.subarray(0, read)) : decoder.end();
      let start = 0;
      for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
        if (!skipping) yield partial + text.slice(start, end);
        partial = '';
        skipping = false;
        start = end + 1;
      }
      if (!skipping) partial += text.slice(start);
      if (partial.length > maxLineChars) {
        partial = '';
        skipping = true;
      }
      if (read === 0) break;
    }
    if (!skipping && partial !== '') yield partial;
  } finally {
    closeSync(fd);
  }
}

/** The JSON objects of a JSONL transcript; lines that are not JSON (a CLI's warnings) are skipped. */
export function* jsonLines(text: TranscriptText): Generator<Record<string, any>> {
  for (const line of typeof text === 'string' ? linesOf(text) : text) {
    if (!line.startsWith('{')) continue;
    try {
      yield JSON.parse(line) as Record<string, any>;
    } catch {
      // A line cut at the deadline.
    }
  }
}

/** An error as a reason: one line, short enough to read in a table. */
export const errorText = (error: unknown) => String(error).replace(/\s+/g, ' ').trim().slice(0, 300);
