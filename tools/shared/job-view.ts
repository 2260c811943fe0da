import { z } from 'zod';
import { A2rlError } from '../../src/util/errors.js';
import { jobId } from '../../src/core/job-ids.js';
import { readTail } from '../../src/util/safe-fs.js';
import type { Run } from '../../src/core/run.js';
import { finishedJobStates, type JobRow } from '../../src/store/store.js';
import { reportProgress, type ToolExtra, type WithNulls } from './define.js';

export const jobViewSchema = z.object({
  job_id: z.string(),
  kind: z.enum(['exec', 'training', 'rollouts', 'grading']),
  command: z.string(),
  state: z.enum(['running', 'succeeded', 'failed', 'cancelled', 'timed_out', 'oom_killed', 'budget_stopped', 'lost']),
  reason: z.string().optional().describe('Why it ended as it did, when not plainly successful'),
  waiting: z
    .string()
    .optional()
    .describe('Why a running job has not started yet, e.g. "pending in Slurm (Resources)": waiting is not charged'),
  exit_code: z.number().optional(),
  started_at_s: z.number().describe('Seconds since the run started'),
  duration_s: z.number(),
  cpu_s: z.number().describe('CPU seconds used so far (charged to the compute budget, except grading)'),
  last_line: z.string().describe('Last line of its output'),
  result: z.unknown().optional().describe('What the job produced, e.g. a rollout batch summary'),
});

/** A job as tools show it; null fields are left out of the answer. */
export type JobView = WithNulls<z.infer<typeof jobViewSchema>>;

/** The id the agent knows a job by, the one the view, the report and the export show too. */

export function viewJob(run: Run, job: JobRow): JobView {
  const end = job.ended_at ?? Date.now();
  return {
    job_id: jobId(job),
    kind: job.kind,
    command: job.command,
    state: job.state,
    reason: job.reason,
    exit_code: job.exit_code,
    started_at_s: Math.round((job.created_at - run.row.created_at) / 100) / 10,
    duration_s: Math.round((end - job.created_at) / 100) / 10,
    cpu_s: Math.round(job.cpu_s * 10) / 10,
    last_line: lastLine(job.log_path),
    ...(job.state === 'running' && run.jobWaiting(job.id) ? { waiting: run.jobWaiting(job.id) } : {}),
    ...(job.result ? { result: JSON.parse(job.result) as unknown } : {}),
  };
}

/** Finds one of this run's agent jobs by the id the agent knows (`job-3` or `3`). */
export function findJob(run: Run, text: string): JobRow {
  const match = /^(?:job-)?(\d+)$/.exec(text.trim());
  const job = match ? run.agentJob(Number(match[1])) : undefined;
  if (!job) {
    throw new A2rlError('NOT_FOUND', `No job "${text}" in this run. Job ids look like job-3; list yours with job_status.`);
  }
  return job;
}

export function isFinished(job: JobRow): boolean {
  return finishedJobStates.includes(job.state);
}

/**
 * Waits up to `seconds` for a job to end. Progress goes out at the start of every slice,
 * never just before the answer: clients may drop a notification that trails its response.
 */
export async function waitForJob(run: Run, job: JobRow, seconds: number, extra: ToolExtra): Promise<JobRow> {
  const deadline = Date.now() + seconds * 1000;
  let current = job;
  while (!isFinished(current) && Date.now() < deadline && !extra.signal.aborted) {
    const elapsed = Math.round((Date.now() - current.created_at) / 1000);
    await reportProgress(extra, elapsed, undefined, `${jobId(job)} ${current.state} after ${elapsed}s: ${lastLine(current.log_path)}`);
    current = await run.waitForJob(job.id, Math.min(5000, deadline - Date.now()));
  }
  return current;
}

/** The last non-empty line of a log, read from its end. */
export function lastLine(path: string): string {
  const lines = readTail(path, 4096)
    .text.split(/\r?\n|\r/)
    .filter((l) => l.trim() !== '');
  return (lines.at(-1) ?? '').slice(0, 300);
}
