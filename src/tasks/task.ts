import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { type BudgetLimits, parseBudget } from './budget.js';
import { A2rlError } from '../util/errors.js';
import { hashDirectory, sha256 } from '../util/hashing.js';
import { tasksRoot } from '../util/paths.js';

/**
 * How an oracle may solve its task. sft: supervised fine-tuning on the training data's answers or demonstrations.
 * reward-only: only the task's reward and environment (launch_rollouts, the env package), never a gold answer or
 * demonstration: the route the paper's question is about, whether an agent can engineer RL post-training.
 */
export const oracleRoutes = ['sft', 'reward-only'] as const;
export type OracleRoute = (typeof oracleRoutes)[number];

const taskFileSchema = z.object({
  id: z.string().regex(/^[a-z0-9-]+$/),
  title: z.string(),
  level: z.union([z.literal(1), z.literal(2), z.literal(3)]),
  tier: z.enum(['micro', 'full']),
  paperTask: z.string(),
  grading: z.string(),
  /** What the 0–100 score measures, e.g. accuracy, pass@1, win rate. */
  metric: z.string(),
  /** Python package shared by the micro tasks, relative to tasks/. */
  library: z.string(),
  /** Agent-visible Python package of this task: folder and import name. */
  env: z.object({ dir: z.string(), package: z.string().regex(/^[a-z_][a-z0-9_]*$/) }),
  baseModel: z.string(),
  trainData: z.string(),
  evalData: z.string(),
  grader: z.object({
    /** A grader kind of src/grading/kinds/ (score, execute, judge): what the server does with the entry's output. */
    kind: z.string(),
    entry: z.string(),
    version: z.string(),
    timeoutSeconds: z.number().positive(),
    cpus: z.number().positive(),
    memoryMb: z.number().int().positive(),
    /** kind judge: the rubric judge script in grader/. */
    judge: z.string().optional(),
    /** kind execute: limits of each program's run. */
    execution: z
      .object({
        timeoutSeconds: z.number().positive(),
        memoryMb: z.number().int().positive(),
        pids: z.number().int().positive(),
        concurrency: z.number().int().positive(),
      })
      .optional(),
  }),
  rollouts: z.object({
    /** Workspace path of the prompts `launch_rollouts` samples from. */
    data: z.string(),
    /** sandbox: the sampler scores episodes itself; judge: the server has them judged against their references. */
    reward: z.enum(['sandbox', 'judge']),
  }),
  submission: z.object({
    requiredFiles: z.array(z.string()).min(1),
    maxBytes: z.number().int().positive(),
    maxFiles: z.number().int().positive(),
  }),
  jobs: z.object({ cpus: z.number().positive(), memoryMb: z.number().int().positive(), pids: z.number().int().positive() }),
  defaultBudget: z.string(),
  instructions: z.string(),
  /**
   * Scripted replays that must each beat the baseline by at least `minImprovement` points within the default budget,
   * one per route that solves the task: the first is the task's main oracle (what `a2rl demo` plays).
   */
  oracles: z
    .array(
      z.object({
        route: z.enum(oracleRoutes),
        replay: z.string(),
        minImprovement: z.number().positive(),
        /** The README table's figure: its range over replays (public / private) and recipe. */
        measured: z.string(),
        /** What one `a2rl demo` of it used on the 2-core machine the README names: the table's compute figures. */
        compute: z.object({
          cpuSeconds: z.number().positive(),
          wallSeconds: z.number().positive(),
          rolloutEpisodes: z.number().int().nonnegative(),
        }),
      }),
    )
    .min(1)
    .refine((oracles) => new Set(oracles.map((o) => o.route)).size === oracles.length, 'one oracle per route'),
  /** What kind of task this is, after its level in the README's task table. */
  summary: z.string(),
  /** The README table's figure: the base model's grade (public, private). */
  figures: z.object({ baseline: z.object({ public: z.number(), private: z.number() }) }),
  /** Points over the baseline (private half) a run must gain to count as a success on the leaderboard. */
  successMargin: z.number().positive().default(10),
});

export type TaskFile = z.infer<typeof taskFileSchema>;

/** A task as the server uses it: its declaration plus absolute paths and content hashes. */
export interface Task extends TaskFile {
  dir: string;
  paths: {
    library: string;
    env: string;
    baseModel: string;
    trainData: string;
    evalData: string;
    grader: string;
    instructions: string;
  };
  /** The oracles' replay files, absolute, in the order of `oracles`. */
  oracleReplays: Array<{ route: OracleRoute; replay: string; minImprovement: number; rolloutEpisodes: number }>;
  defaultLimits: BudgetLimits;
  /** Declared version plus a hash of everything that decides a score, so a changed grader or eval set never reuses old grades. */
  graderVersion: string;
  baseModelHash: string;
}

const emptyLimits: BudgetLimits = { wallSeconds: 0, computeSeconds: 0, submissions: 0, rolloutEpisodes: 0 };

export function loadTask(dir: string): Task {
  const file = taskFileSchema.parse(JSON.parse(readFileSync(join(dir, 'task.json'), 'utf8')));
  const paths = {
    library: join(tasksRoot, file.library),
    env: join(dir, file.env.dir),
    baseModel: join(dir, file.baseModel),
    trainData: join(dir, file.trainData),
    evalData: join(dir, file.evalData),
    grader: join(dir, 'grader'),
    instructions: join(dir, file.instructions),
  };
  const oracleReplays = file.oracles.map(({ route, replay, minImprovement, compute }) => ({
    route,
    replay: join(dir, replay),
    minImprovement,
    rolloutEpisodes: compute.rolloutEpisodes,
  }));
  for (const [name, path] of [...Object.entries(paths), ...oracleReplays.map((o) => [`${o.route} oracle`, o.replay])]) {
    if (!existsSync(path!)) throw new Error(`task ${file.id}: ${name} not found at ${path}`);
  }
  const scoringHash = sha256([paths.grader, paths.evalData, paths.library, paths.env].map((p) => hashDirectory(p)).join('\n')).slice(0, 12);
  return {
    ...file,
    dir,
    paths,
    oracleReplays,
    defaultLimits: parseBudget(file.defaultBudget, emptyLimits),
    graderVersion: `${file.grader.version}+${scoringHash}`,
    baseModelHash: hashDirectory(paths.baseModel),
  };
}

/** The tasks shipped in tasks/: every folder holding a task.json. */
export function listTaskIds(): string[] {
  return readdirSync(tasksRoot, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(tasksRoot, entry.name, 'task.json')))
    .map((entry) => entry.name)
    .sort();
}

const loaded = new Map<string, Task>();

export function getTask(id: string): Task {
  const known = listTaskIds();
  if (!known.includes(id)) {
    throw new A2rlError('NOT_FOUND', `Unknown task "${id}". Available tasks: ${known.join(', ')}.`);
  }
  let task = loaded.get(id);
  if (!task) {
    task = loadTask(join(tasksRoot, id));
    loaded.set(id, task);
  }
  return task;
}
