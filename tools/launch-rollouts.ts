import { z } from 'zod';
import { launchRollouts } from '../src/core/rollouts.js';
import { defineTool } from './shared/define.js';
import { jobViewSchema, viewJob } from './shared/job-view.js';

export const launchRolloutsTool = defineTool({
  name: 'launch_rollouts',
  title: 'Sample rollouts from a checkpoint',
  description:
    'Plays episodes with a checkpoint as the policy, as a job in the sandbox; returns its job id at once. Static ' +
    "tasks: an episode is one completion of a training prompt scored by the task's reward (JSON lines with " +
    'prompt_index, prompt, completion, answer, reward). Interactive tasks: an episode is a trajectory in the ' +
    "task's environment on a training game (JSON lines with game_index, seed, task_type, steps [observation, action, " +
    'reward, done], return, success, length). The episodes land in rollouts/batch-NNN.jsonl: the material for GRPO, ' +
    'PPO, REINFORCE or rejection-sampling fine-tuning. group_size G plays G episodes per prompt or game (GRPO ' +
    'groups). Episodes are charged to the rollout budget, CPU time to compute. When the job ends, job_status shows ' +
    'the batch size, mean reward (or return), for interactive tasks the success rate, and what the batch cost: ' +
    'episodes per second and CPU-seconds per episode. Sampling inside your own jobs (e.g. with the importable reward) ' +
    'is charged to compute only, not to the rollout budget.',
  inputSchema: z
    .object({
      checkpoint: z.string().default('models/base').describe('Checkpoint folder in the workspace, e.g. "output/step-400"'),
      episodes: z.number().int().min(1).max(10_000).describe('Episodes to play in total'),
      group_size: z.number().int().min(1).max(64).default(1).describe('Episodes per prompt or game; episodes must be a multiple of it'),
      temperature: z.number().min(0).max(2).default(1).describe('Sampling temperature; 0 is greedy'),
      seed: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe('Seed for the choice of prompts or games and for sampling (default: the batch number, so each batch differs)'),
      threads: z
        .number()
        .int()
        .min(1)
        .max(64)
        .default(1)
        .describe(
          "Torch threads of the sampler, at most a job's CPUs; the job gets that many CPUs. 1 (the default) plays the most episodes per CPU-second on these small models",
        ),
      gpus: z
        .number()
        .int()
        .min(0)
        .max(8)
        .optional()
        .describe('GPUs for the sampler (default: 1 for a full-tier task on a server with GPUs, where it must sample on one; else 0)'),
    })
    .strict(),
  outputSchema: jobViewSchema.extend({ out: z.string().describe('Where the episodes will be written') }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  handler: async (run, args) => {
    const { job, out } = await launchRollouts(run, {
      checkpoint: args.checkpoint,
      episodes: args.episodes,
      groupSize: args.group_size,
      temperature: args.temperature,
      seed: args.seed,
      threads: args.threads,
      gpus: args.gpus,
    });
    const view = viewJob(run, job);
    return {
      structured: { ...view, out },
      text: `Started ${view.job_id}: ${args.episodes} episodes from ${args.checkpoint} into ${out}. Wait for it with job_status.`,
    };
  },
});
