/**
 * The normalisation both sides of the contamination check go through: text is lowercased and cut into tokens, each a
 * maximal run of letters and digits; everything else (whitespace, punctuation, quotes, JSON's and Python's syntax,
 * list numbering's dots) only separates tokens. Numbers are kept: a GSM8K question with other numbers is another
 * question. So an item reformatted with other whitespace, inside JSON, in a numbered list or a Python string gives the
 * same token sequence. Tokens are kept as two 32-bit hashes, never as strings: a 1 GB workspace is scanned without
 * making a string per word.
 */

/** The tokens of a text: two independent hashes each, and where each starts and ends in the text (UTF-16 offsets). */
export interface TokenRun {
  count: number;
  h1: Int32Array;
  h2: Int32Array;
  start: Int32Array;
  end: Int32Array;
}

/** Whether a UTF-16 code unit belongs to a token: ASCII letters and digits by table, any other letter or digit by Unicode class. */
const asciiWord = new Uint8Array(128);
for (let c = 48; c <= 57; c++) asciiWord[c] = 1;
for (let c = 65; c <= 90; c++) asciiWord[c] = 1;
for (let c = 97; c <= 122; c++) asciiWord[c] = 1;
const unicodeWord = /[\p{L}\p{N}]/u;

const asciiLower = new Uint8Array(128).map((_, c) => (c >= 65 && c <= 90 ? c + 32 : c));

/** A code unit lowercased (ASCII by arithmetic, the rest by the string method). */
function lower(code: number): number {
  if (code < 128) return code >= 65 && code <= 90 ? code + 32 : code;
  return String.fromCharCode(code).toLowerCase().charCodeAt(0);
}

function grow(array: Int32Array<ArrayBuffer>, size: number): Int32Array<ArrayBuffer> {
  const bigger = new Int32Array(size);
  bigger.set(array);
  return bigger;
}

const hexDigit = /^[0-9a-fA-F]{4}$/;
/** Escape letters after a backslash that stand for whitespace or control characters in JSON and Python strings. */
const controlEscapes = new Set(['n', 'r', 't', 'f', 'b', 'v']);

/**
 * The code unit at `i` as the tokeniser reads it, and how many units it spans: a JSON or Python escape of a control
 * character (`\n`, `\t`…) reads as a space, and `\u00e9` as the character it stands for, so an item written inside a
 * JSON string (Python's json.dump escapes every non-ASCII character) gives the tokens it gives as plain text.
 */
function unitAt(text: string, i: number): number {
  const code = text.charCodeAt(i);
  width = 1;
  if (code !== 92 || i + 1 >= text.length) return code;
  const next = text[i + 1]!;
  if (controlEscapes.has(next)) {
    width = 2;
    return 32;
  }
  if (next === 'u' && hexDigit.test(text.slice(i + 2, i + 6))) {
    width = 6;
    return parseInt(text.slice(i + 2, i + 6), 16);
  }
  return code;
}
/** How many code units the last `unitAt` read (a module variable, not an object per character: 1 GB is a billion reads). */
let width = 1;

function isWordCode(code: number): boolean {
  if (code < 128) return asciiWord[code] === 1;
  return unicodeWord.test(String.fromCharCode(code));
}

/** Tokenises a text (see the file's comment). */
export function tokenise(text: string): TokenRun {
  let capacity = Math.max(16, text.length >> 2);
  let h1 = new Int32Array(capacity);
  let h2 = new Int32Array(capacity);
  let start = new Int32Array(capacity);
  let end = new Int32Array(capacity);
  let count = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    // ASCII other than a backslash is read inline (nearly every character); the rest through unitAt.
    let code = text.charCodeAt(i);
    let step = 1;
    if (code === 92 || code >= 128) {
      code = unitAt(text, i);
      step = width;
    }
    if (code < 128 ? asciiWord[code] !== 1 : !isWordCode(code)) {
      i += step;
      continue;
    }
    // FNV-1a and a multiply-xorshift hash of the lowercased code units, side by side.
    let a = 0x811c9dc5 | 0;
    let b = 0x9747b28c | 0;
    const from = i;
    for (;;) {
      const c = code < 128 ? asciiLower[code]! : lower(code);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
      i += step;
      if (i >= n) break;
      code = text.charCodeAt(i);
      step = 1;
      if (code === 92 || code >= 128) {
        code = unitAt(text, i);
        step = width;
      }
      if (code < 128 ? asciiWord[code] !== 1 : !isWordCode(code)) break;
    }
    if (count === capacity) {
      capacity *= 2;
      h1 = grow(h1, capacity);
      h2 = grow(h2, capacity);
      start = grow(start, capacity);
      end = grow(end, capacity);
    }
    h1[count] = a;
    h2[count] = Math.imul(b ^ (b >>> 13), 0x85ebca6b);
    start[count] = from;
    end[count] = i;
    count++;
  }
  return { count, h1, h2, start, end };
}

/** A 53-bit key of the `length` tokens from `at`: what the hidden items' index is looked up by. */
export function windowKey(run: Pick<TokenRun, 'h1' | 'h2'>, at: number, length: number): number {
  let a = 0x2545f491;
  let b = 0x6a09e667 | 0;
  for (let j = at; j < at + length; j++) {
    a = Math.imul(a ^ run.h1[j]!, 0x01000193);
    b = Math.imul(b ^ run.h2[j]!, 0x5bd1e995);
    b ^= b >>> 13;
  }
  return (a >>> 0) * 2097152 + (b >>> 11);
}

/** Whether the `length` tokens of `run` from `at` are those of `other` from `from`. */
export function sameTokens(run: TokenRun, at: number, other: Pick<TokenRun, 'h1' | 'h2'>, from: number, length: number): boolean {
  for (let j = 0; j < length; j++) {
    if (run.h1[at + j] !== other.h1[from + j] || run.h2[at + j] !== other.h2[from + j]) return false;
  }
  return true;
}
