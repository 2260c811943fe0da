import { z } from 'zod';
import { defineTool } from './shared/define.js';
import { findJob, isFinished, jobViewSchema, viewJob } from './shared/job-view.js';

export const cancelJobTool = defineTool({
  name: 'cancel_job',
  title: 'Stop a job',
  description:
    'Stops a running job of this run: TERM to all its processes, then KILL after 5 s. Use it to stop a diverging or ' +
    'useless training early and save compute. Returns the job in its final state; a job that already ended is returned unchanged.',
  inputSchema: z.object({ job_id: z.string().describe('A job id such as "job-3"') }).strict(),
  outputSchema: jobViewSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  handler: async (run, args) => {
    const job = findJob(run, args.job_id);
    const final = isFinished(job) ? job : await run.cancelJob(job.id);
    const view = viewJob(run, final);
    return {
      structured: view,
      text: isFinished(job) ? `${view.job_id} had already ended: ${view.state}.` : `${view.job_id} stopped: ${view.state}.`,
    };
  },
});
