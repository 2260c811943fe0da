import { z } from 'zod';
import { maxConcurrentExecs } from '../src/core/run.js';
import { readTail } from '../src/util/safe-fs.js';
import { defineTool, shellCommandSchema } from './shared/define.js';
import { jobId } from '../src/core/job-ids.js';
import { waitForJob } from './shared/job-view.js';

const maxOutputBytes = 16 * 1024;
/** With the stop grace after it, the answer still comes before clients give up on the call (about 60 s). */
const maxExecSeconds = 45;
const defaultExecSeconds = 30;

export const execTool = defineTool({
  name: 'exec',
  title: 'Run a short command',
  description:
    'Runs a short shell command in the run sandbox (cwd /workspace, no network, /usr/bin/python3 with PyTorch) and returns ' +
    'its exit code and output (stdout and stderr together, the last 16 KiB). For quick things: look at data, check that a ' +
    `script starts, run a few training steps. It is killed after timeout_s (default ${defaultExecSeconds} s, at most ${maxExecSeconds} s); start anything longer with ` +
    `run_training. At most ${maxConcurrentExecs} of a run's execs run at once. Its CPU time is charged to the compute budget.`,
  inputSchema: z
    .object({
      command: shellCommandSchema('Shell command, run with /bin/sh -c'),
      timeout_s: z
        .number()
        .int()
        .min(1)
        .max(maxExecSeconds)
        .default(defaultExecSeconds)
        .describe(`Seconds before the command is killed, 1 to ${maxExecSeconds}`),
    })
    .strict(),
  outputSchema: z.object({
    job_id: z.string(),
    exit_code: z.number().optional(),
    state: z.string(),
    timed_out: z.boolean(),
    output: z.string(),
    output_truncated: z.boolean(),
    duration_s: z.number(),
    cpu_s: z.number(),
  }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run, args, extra) => {
    const started = await run.startJob(
      'exec',
      {
        command: args.command,
        argv: ['/bin/sh', '-c', args.command],
        limits: run.jobLimits(),
        timeoutMs: args.timeout_s * 1000,
      },
      extra.signal,
    );
    const job = await waitForJob(run, started, args.timeout_s + 10, extra);
    const { text, truncated } = readTail(job.log_path, maxOutputBytes);
    const duration = ((job.ended_at ?? Date.now()) - job.created_at) / 1000;
    const structured = {
      job_id: jobId(job),
      exit_code: job.exit_code,
      state: job.state,
      timed_out: job.state === 'timed_out',
      output: text,
      output_truncated: truncated,
      duration_s: Math.round(duration * 10) / 10,
      cpu_s: Math.round(job.cpu_s * 10) / 10,
    };
    // A succeeded job has a reason only when its log was cut (a full disk): the output shown is not all it printed.
    const status = `${job.state === 'succeeded' ? 'exit 0' : job.state}${job.reason ? `: ${job.reason}` : ''}`;
    return { structured, text: `[${status}, ${structured.duration_s}s]\n${truncated ? '…\n' : ''}${text}` };
  },
});
