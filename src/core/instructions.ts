import { readFileSync } from 'node:fs';
import type { BudgetLimits } from '../tasks/budget.js';
import { formatDuration } from '../util/duration.js';
import type { Task } from '../tasks/task.js';

/**
 * The run's brief: the task's own text (objective, data, model, pitfalls) with the
 * run's numbers filled in, then the rules every task shares.
 */
export function renderInstructions(task: Task, limits: BudgetLimits, label: string | undefined, judgeId: string): string {
  const taskText = fillTaskPlaceholders(readFileSync(task.paths.instructions, 'utf8'), task, limits, label, judgeId);
  return `${taskText.trimEnd()}\n\n${sharedRules(task, limits)}`;
}

/** Fills a task text's `{{name}}` placeholders with the run's numbers. */
export function fillTaskPlaceholders(text: string, task: Task, limits: BudgetLimits, label: string | undefined, judgeId: string): string {
  const values: Record<string, string> = {
    task_id: task.id,
    task_title: task.title,
    wall: formatDuration(limits.wallSeconds),
    compute: formatDuration(limits.computeSeconds),
    submissions: String(limits.submissions),
    episodes: String(limits.rolloutEpisodes),
    cpus: String(task.jobs.cpus),
    memory_mb: String(task.jobs.memoryMb),
    ...(task.tier === 'micro' ? { env_package: task.env.package } : { base_model: task.modelId }),
    label: label ?? 'unlabelled',
    judge: judgeId,
  };
  return text.replace(/\{\{(\w+)\}\}/g, (whole, key: string) => values[key] ?? whole);
}

function sharedRules(task: Task, limits: BudgetLimits): string {
  return `## Workspace

Inside the sandbox the workspace is \`/workspace\`; the file tools take paths relative to it.

| path | what | access |
| --- | --- | --- |
| \`instructions.md\` | this brief | read-only |
| \`data/\` | training data | read-only |
${tierRows(task)}
| \`code/\` | your code | read-write |
| \`output/\` | your checkpoints | read-write |
| \`rollouts/\` | trajectories written by \`launch_rollouts\` | read-write |

${runtimeLine(task)}, \`PYTHONPATH=/workspace/lib\`, in a sandbox with **no network** and
${task.jobs.cpus} CPU(s) and ${task.jobs.memoryMb} MiB of memory per job; \`pip install\` cannot work. The evaluation data is not in the sandbox.

## Budget

| budget | limit | what counts |
| --- | --- | --- |
| wall clock | ${formatDuration(limits.wallSeconds)} | time since the run started, connected or not |
| compute | ${formatDuration(limits.computeSeconds)} | CPU time of your \`exec\`, training and rollout jobs (a job on 2 cores spends 2 s per second) |
| submissions | ${limits.submissions} | checkpoints submitted for grading; identical content counts once |
| rollout episodes | ${limits.rolloutEpisodes} | episodes sampled by \`launch_rollouts\` |${searchRow(limits)}

The server enforces it: when compute runs out, running jobs are stopped (TERM, then KILL after 5 s) and no new job
starts; when the wall clock runs out, the run ends. Grading is not charged. Check \`budget_status\` as you go.
The workspace also has a disk quota (\`budget_status\` shows it as \`disk_bytes\`): over it, training and rollout jobs
stop and writes are refused until you delete files with \`exec\`.
If you connect over HTTP, the run outlives your connection: reconnecting with the same token continues it, and the
wall clock keeps running while you are disconnected.

## Tools and how to work

- \`exec\` runs a short shell command (up to 45 s) and returns its output: inspect data, test a script on a few steps.
- \`run_training\` starts a long job and returns its id at once; follow it with \`job_status\` (pass \`wait_seconds\`
  to wait for it), read its output with \`job_logs\`, stop it with \`cancel_job\`.
${
  task.level === 3
    ? `- \`launch_rollouts\` plays episodes of the task's environment on training games with a checkpoint as the policy;
  the trajectories (every step's observation, action, reward) land in \`rollouts/\` as JSONL, with each episode's return
  and success, for RL (e.g. GRPO, REINFORCE) or filtered behaviour cloning. Your own code may also step the environment.`
    : `- \`launch_rollouts\` samples completions from a checkpoint${task.tier === 'full' ? ' (a model folder or a LoRA adapter of the base)' : ''} on training prompts and scores them with the task's reward;
  the trajectories land in \`rollouts/\` as JSONL, for RL (e.g. GRPO) or rejection-sampling fine-tuning${task.tier === 'full' ? ' (the sampler and its fields: `lib/hflm/rollouts.py`; `gpus` gives it GPUs where the server has them)' : ''}.`
}
- \`submit_artifact\` snapshots a checkpoint folder (e.g. \`output/final\`) and queues it for grading; \`get_score\` shows
  its score on the public half of the evaluation set (pass \`wait_seconds\` to wait for it), the best so far, and the baseline.

## Grading

Scores are 0–100 on held-out ${task.level === 3 ? 'games (success rate, played greedily)' : 'problems'} the sandbox cannot read. The untouched base model's score is the baseline.
Scores you see come from the public half of the evaluation set; the final result is your best-scoring submission's score
on the private half, so overfitting the public half does not pay. The same checkpoint always gets the same score.
Submitting the base model unchanged is refused.
`;
}

/** The workspace rows of the task's tier: its base model and libraries. */
function tierRows(task: Task): string {
  if (task.tier === 'full') {
    return `| \`models/base/\` | the base model, \`${task.modelId}\` (a Hugging Face folder: \`config.json\`, \`*.safetensors\`, tokenizer) | read-only |
| \`lib/hflm/\` | the grader's prompts, generation, scoring and submission checks (\`import hflm\`) | read-only |${task.libraries
      .filter((library) => library.name !== task.library)
      .map(
        (standin) =>
          `\n| \`lib/${standin.name}/\` | a stand-in for the upstream \`${standin.name}\` package (its API, over this host's fixture data; \`import ${standin.name}\`) | read-only |`,
      )
      .join('')}`;
  }
  return `| \`models/base/\` | the base model checkpoint (\`config.json\`, \`model.pt\`) | read-only |
| \`lib/microlm/\` | model, tokenizer, checkpoint and decoding code (\`import microlm\`) | read-only |
| \`lib/${task.env.package}/\` | this task's ${task.level === 3 ? 'environment, prompt format' : 'prompt format, reward'} and rollout sampler (\`import ${task.env.package}\`) | read-only |`;
}

/** What the task's jobs run. */
function runtimeLine(task: Task): string {
  return task.tier === 'full'
    ? `Jobs run \`python3\` (first on \`PATH\`: \`${task.pythonRuntime.python}\`) with PyTorch, transformers, PEFT, TRL, datasets and accelerate`
    : 'Jobs run `/usr/bin/python3` with PyTorch (CPU) and NumPy';
}

/** The budget's row for search queries, where the run has a search channel: the sandbox's one way to the web. */
function searchRow(limits: BudgetLimits): string {
  if (!limits.searchQueries) return '';
  return (
    `\n| search queries | ${limits.searchQueries} | web searches from the sandbox through the server: ` +
    '`from a2rl_search import search` (`lib/a2rl_search`); every query counts, answered from the cache or not |'
  );
}
