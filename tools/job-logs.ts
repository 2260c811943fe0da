import { open } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import { z } from 'zod';
import { defaultLogCap } from '../src/jobs/capped-log.js';
import { A2rlError } from '../src/util/errors.js';
import { defineTool } from './shared/define.js';
import { findJob } from './shared/job-view.js';

const maxLines = 1000;
const maxLineChars = 2000;
/** The end of a log the default tail reads: enough for the most lines it returns, whatever the log's size. */
const tailWindowBytes = 4 * 2 ** 20;
/** Bounds of a scan from the start (grep, start_line): a whole capped log fits. */
const maxScanBytes = 64 * 2 ** 20;
const maxScanMs = 5000;
/** A scan past its time bound by this much is stopped from outside: its thread is terminated. */
const scanGraceMs = 1000;
/** Scans of one run in flight at once: each holds a thread (a few MiB) for up to its time bound. */
const maxScansPerRun = 3;
const scansInFlight = new Map<string, number>();

interface Line {
  n: number;
  text: string;
}

interface ScanRequest {
  path: string;
  /** Texts any of which a line must contain (case-insensitive); none: every line. */
  grep?: string[];
  /** From this line on, the first `count` lines kept; without it, the last `count`. */
  startLine?: number;
  count: number;
}

interface ScanResult {
  lines: Line[];
  /** Lines read. */
  read: number;
  stoppedEarly?: string;
}

/**
 * The scan, run in a thread of its own (evaluated code, so it runs the same from the sources and from dist): the
 * server's event loop neither does its work nor collects its garbage (invariant 9). A grep is one regular expression
 * of its texts as literals: no quantifier, so no backtracking blow-up, and no copy of a line to search it.
 */
const scannerSource = `
const { workerData, parentPort } = require('node:worker_threads');
const { openSync, readSync, closeSync } = require('node:fs');
const { StringDecoder } = require('node:string_decoder');
const { path, grep, startLine, count, maxScanBytes, maxScanMs, maxLineChars } = workerData;
const literals = grep ? [...new Set(grep.filter((text) => text !== '').map((text) => text.replace(/[.*+?^\${}()|[\\]\\\\]/g, '\\\\$&')))] : [];
const pattern = grep ? (literals.length ? new RegExp(literals.join('|'), 'i') : /(?!)/) : undefined;
const started = Date.now();
const lines = [];
let read = 0;
let stoppedEarly;
const keep = (text) => {
  read++;
  if (pattern && !pattern.test(text)) return;
  if (startLine !== undefined) {
    if (read >= startLine && lines.length < count) lines.push({ n: read, text });
  } else {
    lines.push({ n: read, text });
    if (lines.length >= 2 * count) lines.splice(0, lines.length - count);
  }
};
let fd;
try {
  fd = openSync(path, 'r');
} catch {}
if (fd !== undefined) {
  const buffer = Buffer.alloc(1 << 20);
  // A character cut at a chunk's end is completed by the next chunk, not read as two bad ones.
  const decoder = new StringDecoder('utf8');
  let partial = '';
  let position = 0;
  for (;;) {
    if (position >= maxScanBytes) { stoppedEarly = 'scanned its limit of ' + maxScanBytes + ' bytes'; break; }
    if (Date.now() - started > maxScanMs) { stoppedEarly = 'scanned for its limit of ' + maxScanMs / 1000 + ' s'; break; }
    const bytesRead = readSync(fd, buffer, 0, buffer.length, position);
    if (bytesRead === 0) break;
    position += bytesRead;
    const parts = (partial + decoder.write(buffer.subarray(0, bytesRead))).split(/\\r?\\n/);
    partial = parts.pop().slice(0, 64 * maxLineChars);
    for (const text of parts) keep(text.slice(0, maxLineChars));
  }
  closeSync(fd);
  if (!stoppedEarly && partial !== '') keep(partial.slice(0, maxLineChars));
}
if (startLine === undefined) lines.splice(0, Math.max(0, lines.length - count));
parentPort.postMessage({ lines, read, stoppedEarly });
`;

/**
 * Scans a log from its start in a thread of its own, within the scan's bounds; a thread still at work
 * {@link scanGraceMs} past them is terminated. At most {@link maxScansPerRun} of one run at once.
 */
async function scanLog(runId: string, request: ScanRequest): Promise<ScanResult> {
  const inFlight = scansInFlight.get(runId) ?? 0;
  if (inFlight >= maxScansPerRun) {
    throw new A2rlError(
      'BUSY',
      `${inFlight} grep or start_line reads of this run's logs are still running, at most ${maxScansPerRun} at once; nothing was read. Wait for their answers and ask again (a plain tail is answered at once).`,
    );
  }
  scansInFlight.set(runId, inFlight + 1);
  let worker: Worker | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    worker = new Worker(scannerSource, {
      eval: true,
      workerData: { ...request, maxScanBytes, maxScanMs, maxLineChars },
      // What it keeps is a few MiB at most (a chunk, the lines it returns): its heap is bounded too.
      resourceLimits: { maxOldGenerationSizeMb: 64 },
    });
    const scanning = worker;
    return await new Promise<ScanResult>((resolve, reject) => {
      timer = setTimeout(
        () => resolve({ lines: [], read: 0, stoppedEarly: `ran past its limit of ${maxScanMs / 1000} s and was stopped` }),
        maxScanMs + scanGraceMs,
      );
      scanning.once('message', resolve);
      scanning.once('error', reject);
      scanning.once('exit', () => reject(new Error('the log scan ended without an answer')));
    });
  } finally {
    clearTimeout(timer);
    void worker?.terminate();
    const left = scansInFlight.get(runId)! - 1;
    if (left === 0) scansInFlight.delete(runId);
    else scansInFlight.set(runId, left);
  }
}

/** The last `count` lines of a log, read from its end: the cost does not depend on the log's size. */
async function tailLines(path: string, count: number): Promise<{ lines: Line[]; total: number | null }> {
  const file = await open(path, 'r').catch(() => undefined);
  if (!file) return { lines: [], total: 0 };
  try {
    const { size } = await file.stat();
    const start = Math.max(0, size - tailWindowBytes);
    const buffer = Buffer.alloc(size - start);
    const { bytesRead } = await file.read(buffer, 0, buffer.length, start);
    const texts = buffer.toString('utf8', 0, bytesRead).split(/\r?\n/);
    if (texts.at(-1) === '') texts.pop();
    // From the middle of a log, the first line read is likely cut: it is not shown, and numbers are not known.
    if (start > 0) texts.shift();
    const total = start === 0 ? texts.length : null;
    const shown = texts
      .slice(-count)
      .map((text, i, all) => ({ n: total === null ? 0 : total - all.length + i + 1, text: text.slice(0, maxLineChars) }));
    return { lines: shown, total };
  } finally {
    await file.close();
  }
}

export const jobLogsTool = defineTool({
  name: 'job_logs',
  title: "Read a job's output",
  description:
    'Returns the output (stdout and stderr together) of a job, running or finished. By default the last 100 lines; ' +
    'with grep only the lines containing that text (case-insensitive; several alternatives separated by |, e.g. "loss|error"); ' +
    `with start_line a window from that line on. At most ${maxLines} lines per call, each cut at ${maxLineChars} characters. ` +
    'Returns the lines with their line numbers and the total line count. A tail reads only the end of the log; grep and start_line ' +
    `scan from the start, at most ${maxScanBytes / 2 ** 20} MiB or ${maxScanMs / 1000} s per call (${maxScansPerRun} at once), and say when they stopped early. ` +
    `A job log keeps the first ${defaultLogCap.headBytes / 2 ** 20} and the last ${defaultLogCap.tailBytes / 2 ** 20} MiB of output ` +
    '(by default), with a line saying how much was dropped between.',
  inputSchema: z
    .object({
      job_id: z.string().describe('A job id such as "job-3"'),
      tail: z.number().int().min(1).max(maxLines).default(100).describe('How many lines: from the end, or from start_line when given'),
      start_line: z.number().int().min(1).optional().describe('First line to return (1-based), for reading a window'),
      grep: z
        .string()
        .min(1)
        .max(500)
        .optional()
        .describe('Only lines containing this text (case-insensitive); alternatives separated by |'),
    })
    .strict(),
  outputSchema: z.object({
    job_id: z.string(),
    total_lines: z.number().optional().describe('Lines in the log; left out when this call did not read all of it'),
    first_line: z
      .number()
      .optional()
      .describe('Line number of the first returned line (1-based); 0 when none; left out for a tail of a log too long to number'),
    lines: z.array(z.string()),
    stopped_early: z.string().optional().describe('Set when a scan stopped at its bounds before the end of the log: why, and where'),
  }),
  annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run, args) => {
    const job = findJob(run, args.job_id);
    if (args.grep === undefined && args.start_line === undefined) {
      const { lines, total } = await tailLines(job.log_path, args.tail);
      const structured = {
        job_id: args.job_id,
        total_lines: total,
        first_line: total === null ? null : (lines[0]?.n ?? 0),
        lines: lines.map((l) => l.text),
      };
      const numbered = lines.map((l) => (total === null ? l.text : `${String(l.n).padStart(6)}  ${l.text}`)).join('\n');
      return { structured, text: numbered || '(the log is empty)' };
    }
    const scan = await scanLog(run.id, {
      path: job.log_path,
      grep: args.grep?.split('|'),
      startLine: args.start_line,
      count: args.tail,
    });
    const window = scan.lines;
    const structured = {
      job_id: args.job_id,
      total_lines: scan.stoppedEarly ? null : scan.read,
      first_line: window[0]?.n ?? 0,
      lines: window.map((l) => l.text),
      ...(scan.stoppedEarly ? { stopped_early: `${scan.stoppedEarly}, at line ${scan.read}` } : {}),
    };
    const text = window.map((l) => `${String(l.n).padStart(6)}  ${l.text}`).join('\n');
    const note = scan.stoppedEarly ? `\n(stopped early: ${structured.stopped_early})` : '';
    return { structured, text: (text || `(no matching lines in ${scan.read} lines)`) + note };
  },
});
