import { readFileSync } from 'node:fs';
import type { BudgetLimits } from '../tasks/budget.js';
import { formatDuration } from '../util/duration.js';
import { fillTaskPlaceholders } from '../core/instructions.js';
import type { Task } from '../tasks/task.js';
import { serverName } from './agents.js';

/**
 * The prompt every CLI agent gets for a task: the task's own introduction (its instructions
 * up to the first section, without the run's label) and the same directions for all agents,
 * so that agents differ in what they do, never in what they were told.
 */
export function taskPrompt(task: Task, limits: BudgetLimits, judgeId: string): string {
  const raw = readFileSync(task.paths.instructions, 'utf8');
  const firstSection = raw.search(/^## /m);
  const introduction = (firstSection === -1 ? raw : raw.slice(0, firstSection))
    .replace(/^# .*\n/, '')
    .replace(/\s*This run: `\{\{label\}\}`\./, '');
  const text = fillTaskPlaceholders(introduction, task, limits, undefined, judgeId).trim();
  return `You are being benchmarked by a2rl-bench on the task "${task.title}" (${task.id}).

${text}

Everything you need is behind the MCP server "${serverName}": its tools are the only tools you have, and they act on a
sandboxed workspace on the benchmark server. Start by calling read_instructions: it gives the objective, the workspace,
the rules and how you are graded. Your budget: ${formatDuration(limits.wallSeconds)} of wall clock (you are stopped when it
runs out), ${formatDuration(limits.computeSeconds)} of compute, ${limits.submissions} submissions. Long jobs return an id
at once: follow them with job_status. Submit your best checkpoint with submit_artifact and check its score with get_score
before the wall clock runs out; only submitted checkpoints count. Work on your own until you are done: nobody will answer
questions.
`;
}
