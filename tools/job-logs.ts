import { closeSync, openSync, readSync } from 'node:fs';
import { z } from 'zod';
import { defineTool } from './shared/define.js';
import { findJob } from './shared/job-view.js';

const maxLines = 1000;
const maxLineChars = 2000;

interface Line {
  n: number;
  text: string;
}

/** Reads a log in 1 MiB chunks, line by line: memory stays bounded whatever the log's size. */
function scanLines(path: string, onLine: (line: Line) => void): number {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return 0;
  }
  const buffer = Buffer.alloc(1 << 20);
  let partial = '';
  let n = 0;
  try {
    for (let read = readSync(fd, buffer); read > 0; read = readSync(fd, buffer)) {
      const parts = (partial + buffer.toString('utf8', 0, read)).split(/\r?\n/);
      partial = parts.pop()!.slice(0, 64 * maxLineChars);
      for (const text of parts) onLine({ n: ++n, text: text.slice(0, maxLineChars) });
    }
  } finally {
    closeSync(fd);
  }
  if (partial !== '') onLine({ n: ++n, text: partial.slice(0, maxLineChars) });
  return n;
}

export const jobLogsTool = defineTool({
  name: 'job_logs',
  title: "Read a job's output",
  description:
    'Returns the output (stdout and stderr together) of a job, running or finished. By default the last 100 lines; ' +
    'with grep only the lines containing that text (case-insensitive; several alternatives separated by |, e.g. "loss|error"); ' +
    `with start_line a window from that line on. At most ${maxLines} lines per call, each cut at ${maxLineChars} characters. ` +
    'Returns the lines with their line numbers and the total line count.',
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
    total_lines: z.number(),
    first_line: z.number().describe('Line number of the first returned line (1-based); 0 when none'),
    lines: z.array(z.string()),
  }),
  annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run, args) => {
    const job = findJob(run, args.job_id);
    const needles = args.grep
      ?.toLowerCase()
      .split('|')
      .filter((needle) => needle !== '');
    const matches = (text: string) => !needles || needles.some((needle) => text.toLowerCase().includes(needle));
    const window: Line[] = [];
    const total = scanLines(job.log_path, (line) => {
      if (!matches(line.text)) return;
      if (args.start_line !== undefined) {
        if (line.n >= args.start_line && window.length < args.tail) window.push(line);
      } else {
        window.push(line);
        if (window.length >= 2 * args.tail) window.splice(0, window.length - args.tail);
      }
    });
    if (args.start_line === undefined) window.splice(0, Math.max(0, window.length - args.tail));
    const structured = { job_id: args.job_id, total_lines: total, first_line: window[0]?.n ?? 0, lines: window.map((l) => l.text) };
    const text = window.map((l) => `${String(l.n).padStart(6)}  ${l.text}`).join('\n');
    return { structured, text: text || `(no matching lines; the log has ${total} lines)` };
  },
});
