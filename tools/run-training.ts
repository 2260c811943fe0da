import { z } from 'zod';
import { defineTool, shellCommandSchema } from './shared/define.js';
import { jobViewSchema, viewJob } from './shared/job-view.js';

export const runTrainingTool = defineTool({
  name: 'run_training',
  title: 'Start a training job',
  description:
    "Starts a long-running job in the run sandbox (cwd /workspace, no network, the task's python3 with PyTorch, " +
    'PYTHONPATH=/workspace/lib) and returns its job id at once. Use it for training and any other long work; follow it with ' +
    'job_status (wait_seconds to wait), job_logs and cancel_job. It runs until it ends, its timeout passes, or the budget ' +
    'is spent. Its CPU time (GPU time when it has GPUs) is charged to the compute budget; a job asking for GPUs waits until they are free. Save checkpoints under output/ as instructions.md says.',
  inputSchema: z
    .object({
      command: shellCommandSchema('Shell command, e.g. "python3 code/train.py --steps 800"'),
      cpus: z.number().min(0.1).optional().describe("CPU cores for the job (default and maximum: the task's per-job limit)"),
      memory_mb: z.number().int().positive().optional().describe("Memory limit in MiB (default and maximum: the task's per-job limit)"),
      gpus: z.number().int().min(0).max(8).default(0).describe('GPUs for the job; 0 on CPU-only servers'),
      timeout_minutes: z
        .number()
        .positive()
        .max(1440)
        .optional()
        .describe('Stop the job after this many minutes (default: until the budget ends)'),
    })
    .strict(),
  outputSchema: jobViewSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run, args) => {
    const job = await run.startJob('training', {
      command: args.command,
      argv: ['/bin/sh', '-c', args.command],
      limits: run.jobLimits({ cpus: args.cpus, memoryMb: args.memory_mb }),
      gpuCount: run.checkGpuRequest(args.gpus),
      timeoutMs: args.timeout_minutes === undefined ? undefined : args.timeout_minutes * 60_000,
    });
    run.snapshotCode({ job_id: job.id });
    const view = viewJob(run, job);
    return {
      structured: view,
      text: `Started ${view.job_id}: ${args.command}\nFollow it with job_status (wait_seconds up to 50) and job_logs.`,
    };
  },
});
