import { open } from 'node:fs/promises';
import { z } from 'zod';
import { defaultLogCap } from '../src/jobs/capped-log.js';
import { defineTool } from './shared/define.js';
import { findJob } from './shared/job-view.js';

const maxLines = 1000;
const maxLineChars = 2000;
/** The end of a log the default tail reads: enough for the most lines it returns, whatever the log's size. */
const tailWindowBytes = 4 * 2 ** 20;
/** Bounds of a scan from the start (grep, start_line): a whole capped log fits, and the server's loop is yielded between chunks. */
const maxScanBytes = 64 * 2 ** 20;
const maxScanMs = 5000;
const chunkBytes = 1 << 20;

interface Line {
  n: number;
  text: string;
}

/**
 * Reads a log line by line from its start, in 1 MiB chunks read off the event loop, until
 * `onLine` says stop, the end, or the scan's bounds. Returns the lines seen and, when it
 * stopped before the end, why.
 */
async function scanLines(path: string, onLine: (line: Line) => boolean | void): Promise<{ lines: number; stoppedEarly?: string }> {
  const file = await open(path, 'r').catch(() => undefined);
  if (!file) return { lines: 0 };
  const started = Date.now();
  const buffer = Buffer.alloc(chunkBytes);
  let partial = '';
  let n = 0;
  let position = 0;
  try {
    for (;;) {
      if (position >= maxScanBytes) return { lines: n, stoppedEarly: `scanned its limit of ${maxScanBytes} bytes` };
      if (Date.now() - started > maxScanMs) return { lines: n, stoppedEarly: `scanned for its limit of ${maxScanMs / 1000} s` };
      const { bytesRead } = await file.read(buffer, 0, chunkBytes, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      const parts = (partial + buffer.toString('utf8', 0, bytesRead)).split(/\r?\n/);
      partial = parts.pop()!.slice(0, 64 * maxLineChars);
      for (const text of parts) if (onLine({ n: ++n, text: text.slice(0, maxLineChars) }) === false) return { lines: n };
    }
  } finally {
    await file.close();
  }
  if (partial !== '') onLine({ n: ++n, text: partial.slice(0, maxLineChars) });
  return { lines: n };
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
    `scan from the start, at most ${maxScanBytes / 2 ** 20} MiB or ${maxScanMs / 1000} s per call, and say when they stopped early. ` +
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
    const needles = args.grep
      ?.toLowerCase()
      .split('|')
      .filter((needle) => needle !== '');
    const matches = (text: string) => !needles || needles.some((needle) => text.toLowerCase().includes(needle));
    const window: Line[] = [];
    const scan = await scanLines(job.log_path, (line) => {
      if (!matches(line.text)) return;
      if (args.start_line !== undefined) {
        if (line.n >= args.start_line && window.length < args.tail) window.push(line);
      } else {
        window.push(line);
        if (window.length >= 2 * args.tail) window.splice(0, window.length - args.tail);
      }
    });
    if (args.start_line === undefined) window.splice(0, Math.max(0, window.length - args.tail));
    const structured = {
      job_id: args.job_id,
      total_lines: scan.stoppedEarly ? null : scan.lines,
      first_line: window[0]?.n ?? 0,
      lines: window.map((l) => l.text),
      ...(scan.stoppedEarly ? { stopped_early: `${scan.stoppedEarly}, at line ${scan.lines}` } : {}),
    };
    const text = window.map((l) => `${String(l.n).padStart(6)}  ${l.text}`).join('\n');
    const note = scan.stoppedEarly ? `\n(stopped early: ${structured.stopped_early})` : '';
    return { structured, text: (text || `(no matching lines in ${scan.lines} lines)`) + note };
  },
});
