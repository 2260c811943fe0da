import { z } from 'zod';
import { defineTool, maxWaitSeconds } from './shared/define.js';
import { findJob, type JobView, jobViewSchema, viewJob, waitForJob } from './shared/job-view.js';

export const jobStatusTool = defineTool({
  name: 'job_status',
  title: 'Job status',
  description:
    'Shows the state of one job (running, succeeded, failed, cancelled, timed_out, oom_killed, budget_stopped, lost) with ' +
    'its exit code, the reason it ended, duration, CPU seconds and last output line, or of all jobs of this run when no ' +
    `job_id is given. With wait_seconds (at most ${maxWaitSeconds}) it waits for the job to end first, sending progress ` +
    'notifications: poll a training job this way instead of calling in a tight loop.',
  inputSchema: z
    .object({
      job_id: z.string().optional().describe('A job id such as "job-3"; omit for all jobs'),
      wait_seconds: z.number().min(0).max(maxWaitSeconds).default(0).describe(`Wait up to this long for the job to end (needs job_id)`),
    })
    .strict(),
  outputSchema: z.object({ jobs: z.array(jobViewSchema) }),
  annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run, args, extra) => {
    if (args.job_id === undefined) {
      run.sampleJobs();
      const jobs = run.listJobs().map((job) => viewJob(run, job));
      return { structured: { jobs }, text: jobs.length ? jobs.map(describe).join('\n') : 'No jobs yet.' };
    }
    const job = await waitForJob(run, findJob(run, args.job_id), args.wait_seconds, extra);
    const view = viewJob(run, job);
    return { structured: { jobs: [view] }, text: describe(view) };
  },
});

function describe(job: JobView): string {
  const end = job.reason ? ` (${job.reason})` : job.waiting ? ` (${job.waiting})` : '';
  return `${job.job_id} [${job.kind}] ${job.state}${end}, ${job.duration_s}s, cpu ${job.cpu_s}s: ${job.command}\n  last line: ${job.last_line}`;
}
