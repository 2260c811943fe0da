import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { A2rlError } from '../src/errors.js';
import { defineTool } from './define.js';
import { findJob } from './jobs-view.js';

const maxLines = 1000;

export const jobLogsTool = defineTool({
  name: 'job_logs',
  title: "Read a job's output",
  description:
    'Returns the output (stdout and stderr together) of a job, running or finished. By default the last 100 lines; ' +
    'with grep only lines matching a regular expression; with start_line a window from that line on. ' +
    `At most ${maxLines} lines per call. Returns the lines with their line numbers and the total line count.`,
  inputSchema: z
    .object({
      job_id: z.string().describe('A job id such as "job-3"'),
      tail: z.number().int().min(1).max(maxLines).default(100).describe('How many lines from the end (when start_line is not given)'),
      start_line: z.number().int().min(1).optional().describe('First line to return (1-based), for reading a window'),
      grep: z.string().max(500).optional().describe('Only lines matching this regular expression (case-insensitive), e.g. "loss|error"'),
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
    let pattern: RegExp | undefined;
    if (args.grep !== undefined) {
      try {
        pattern = new RegExp(args.grep, 'i');
      } catch (error) {
        throw new A2rlError(
          'INVALID_INPUT',
          `grep "${args.grep}" is not a valid regular expression (${(error as Error).message}); escape special characters such as ( or [.`,
        );
      }
    }
    const all = existsSync(job.log_path) ? readFileSync(job.log_path, 'utf8').split(/\r?\n/) : [];
    if (all.at(-1) === '') all.pop();
    let numbered = all.map((text, i) => ({ n: i + 1, text }));
    if (pattern) numbered = numbered.filter((line) => pattern.test(line.text));
    const window =
      args.start_line !== undefined
        ? numbered.filter((line) => line.n >= args.start_line!).slice(0, args.tail)
        : numbered.slice(-args.tail);
    const structured = { job_id: args.job_id, total_lines: all.length, first_line: window[0]?.n ?? 0, lines: window.map((l) => l.text) };
    const text = window.map((l) => `${String(l.n).padStart(6)}  ${l.text}`).join('\n');
    return { structured, text: text || `(no matching lines; the log has ${all.length} lines)` };
  },
});
