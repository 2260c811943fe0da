import { z } from 'zod';
import { formatDuration } from '../src/util/duration.js';
import { defineTool } from './shared/define.js';

const lineSchema = z.object({ used: z.number(), limit: z.number(), left: z.number() });

export const budgetStatusTool = defineTool({
  name: 'budget_status',
  title: 'Budget',
  description:
    'Shows what this run has used and has left: wall-clock seconds, compute (CPU seconds of your jobs), submissions and ' +
    'rollout episodes, search queries (where the run has a search channel), which budgets are exhausted, whether the run is still active, and how many bytes the run takes on disk ' +
    '(workspace, job logs, snapshots) against its quota. Cheap; call it whenever you plan.',
  inputSchema: z.object({}).strict(),
  outputSchema: z.object({
    run_id: z.string(),
    task_id: z.string(),
    run_state: z.enum(['active', 'ended']),
    end_reason: z.string().optional(),
    wall_seconds: lineSchema,
    compute_seconds: lineSchema,
    submissions: lineSchema,
    rollout_episodes: lineSchema,
    search_queries: lineSchema.optional().describe('Queries made through the search channel (lib/a2rl_search), for runs that have one'),
    exhausted: z.array(z.string()),
    disk_bytes: lineSchema.extend({
      measured_seconds_ago: z
        .number()
        .optional()
        .describe('Age of the disk figure, measured in the background every second (less often for a tree that is slow to walk)'),
    }),
    compute_measured_by: z.string().describe("Where jobs' CPU time is read from"),
  }),
  annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run) => {
    const { row, budget } = run.status();
    // The answer carries the last figure and its age: the engine's budget check walks the run every second, less often
    // after a slow walk (a huge tree), and calls here must not make it walk more.
    if (run.disk().measured_seconds_ago === null) await run.measureDisk();
    const disk = run.disk();
    const structured = {
      run_id: run.id,
      task_id: run.task.id,
      run_state: row.state,
      // Left out while the run is active rather than null: a result without nulls is answered as it is, with no copy.
      end_reason: row.end_reason ?? undefined,
      ...budget,
      disk_bytes: disk,
      compute_measured_by: run.computeAccounting,
    };
    const text = [
      `run ${row.state}${row.end_reason ? ` (${row.end_reason})` : ''}`,
      `wall: ${formatDuration(budget.wall_seconds.used)} of ${formatDuration(budget.wall_seconds.limit)}`,
      `compute: ${formatDuration(budget.compute_seconds.used)} of ${formatDuration(budget.compute_seconds.limit)} CPU time, measured by ${run.computeAccounting}`,
      `submissions: ${budget.submissions.used} of ${budget.submissions.limit}`,
      `rollout episodes: ${budget.rollout_episodes.used} of ${budget.rollout_episodes.limit}`,
      ...(budget.search_queries ? [`search queries: ${budget.search_queries.used} of ${budget.search_queries.limit}`] : []),
      `disk: ${Math.ceil(disk.used / 2 ** 20)} MiB of ${Math.floor(disk.limit / 2 ** 20)} MiB`,
    ].join('\n');
    return { structured, text };
  },
});
