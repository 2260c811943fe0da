import { z } from 'zod';
import { launchRollouts } from '../src/rollouts.js';
import { defineTool } from './define.js';
import { jobViewSchema, viewJob } from './jobs-view.js';

export const launchRolloutsTool = defineTool({
  name: 'launch_rollouts',
  title: 'Sample rollouts from a checkpoint',
  description:
    "Samples completions (episodes) from a checkpoint on training prompts and scores each with the task's reward, as a " +
    'job in the sandbox; returns its job id at once. The episodes land in rollouts/batch-NNN.jsonl, one JSON object per ' +
    'line with prompt_index, prompt, completion, answer and reward: the material for GRPO, PPO or rejection-sampling ' +
    'fine-tuning. group_size G samples G completions per prompt (GRPO groups). Episodes are charged to the rollout ' +
    'budget, CPU time to compute. When the job ends, job_status shows the batch size and mean reward.',
  inputSchema: z
    .object({
      checkpoint: z.string().default('models/base').describe('Checkpoint folder in the workspace, e.g. "output/step-400"'),
      episodes: z.number().int().min(1).max(10_000).describe('Completions to sample in total'),
      group_size: z.number().int().min(1).max(64).default(1).describe('Completions per prompt; episodes must be a multiple of it'),
      temperature: z.number().min(0).max(2).default(1).describe('Sampling temperature; 0 is greedy'),
      seed: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe('Seed for prompt choice and sampling (default: the batch number, so each batch differs)'),
    })
    .strict(),
  outputSchema: jobViewSchema.extend({ out: z.string().describe('Where the episodes will be written') }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  handler: async (run, args) => {
    const { job, out } = launchRollouts(run, {
      checkpoint: args.checkpoint,
      episodes: args.episodes,
      groupSize: args.group_size,
      temperature: args.temperature,
      seed: args.seed,
    });
    const view = viewJob(run, job);
    return {
      structured: { ...view, out },
      text: `Started ${view.job_id}: ${args.episodes} episodes from ${args.checkpoint} into ${out}. Wait for it with job_status.`,
    };
  },
});
