import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { type BudgetLimits, parseBudget } from './budget.js';
import { A2rlError } from '../util/errors.js';
import { hashDirectory, sha256 } from '../util/hashing.js';
import { tasksRoot } from '../util/paths.js';
import type { Mount } from '../../sandbox/contract.js';
import type { SnapshotLimits } from '../store/submission-snapshots.js';

/**
 * How an oracle may solve its task. sft: supervised fine-tuning on the training data's answers or demonstrations.
 * reward-only: only the task's reward and environment (launch_rollouts, the env package), never a gold answer or
 * demonstration: the route the paper's question is about, whether an agent can engineer RL post-training.
 */
export const oracleRoutes = ['sft', 'reward-only'] as const;
export type OracleRoute = (typeof oracleRoutes)[number];

/** The task's grader: what the server runs in a grading sandbox, and what it does with the output. */
const graderSchema = z.object({
  /** A grader kind of src/grading/kinds/ (score, execute, judge): what the server does with the entry's output. */
  kind: z.string(),
  entry: z.string(),
  version: z.string(),
  timeoutSeconds: z.number().positive(),
  cpus: z.number().positive(),
  memoryMb: z.number().int().positive(),
  /** kind judge: the rubric judge script in grader/. */
  judge: z.string().optional(),
  /**
   * The grader's agent searches the web (DeepSearchQA): the server gives each grading a search channel of its own
   * (src/search/service.ts, openForGrading), and serves the task only with a search provider.
   */
  search: z.boolean().optional(),
  /** kind execute: limits of each program's run. */
  execution: z
    .object({
      timeoutSeconds: z.number().positive(),
      memoryMb: z.number().int().positive(),
      pids: z.number().int().positive(),
      concurrency: z.number().int().positive(),
    })
    .optional(),
});

/** What every task declares, whatever its tier. */
const sharedFields = {
  id: z.string().regex(/^[a-z0-9-]+$/),
  title: z.string(),
  level: z.union([z.literal(1), z.literal(2), z.literal(3)]),
  paperTask: z.string(),
  grading: z.string(),
  /** What the 0–100 score measures, e.g. accuracy, pass@1, win rate. */
  metric: z.string(),
  /** Python package shared by the tier's tasks, relative to tasks/: microlm, hflm. */
  library: z.string(),
  grader: graderSchema,
  jobs: z.object({ cpus: z.number().positive(), memoryMb: z.number().int().positive(), pids: z.number().int().positive() }),
  defaultBudget: z.string(),
  instructions: z.string(),
  /** What kind of task this is, after its level in the README's task table. */
  summary: z.string(),
  /** Points over the baseline (private half) a run must gain to count as a success on the leaderboard. */
  successMargin: z.number().positive().default(10),
  /**
   * The contamination check (src/integrity/): how the hidden items are compared with what the agent could train from,
   * and from how many found items a run is flagged (fewer, and it is only suspect: shown, not flagged).
   */
  integrity: z
    .object({
      /** A kind of src/integrity/hidden-items.ts (question-answer, program, instruction-reference, game-file, shopping-goal, episode); else recognised. */
      items: z.string().optional(),
      ngram: z.number().int().min(5).default(13),
      minTokens: z.number().int().min(3).default(8),
      window: z.number().int().positive().default(64),
      flagAtItems: z.number().int().positive().default(3),
      /**
       * For a task with decoys: hidden items found beyond what the decoys found explain, in at least this share of its
       * hidden set (plus a margin), flag a run whatever the decoy test says (a leak diluted in template draws hides
       * from the test, not from that excess); src/integrity/verdict.ts.
       */
      flagAtShare: z.number().gt(0).lte(1).default(0.025),
      /** For a task with decoys (`<evalData>/decoys.jsonl`): flagged only when the decoy test's p is below this as well (src/integrity/verdict.ts). */
      flagBelowP: z.number().gt(0).lt(1).default(0.001),
    })
    .strict()
    .refine((integrity) => integrity.minTokens <= integrity.ngram, 'minTokens must be at most ngram')
    .prefault({}),
  rollouts: z.object({
    /** Workspace path of the prompts `launch_rollouts` samples from. */
    data: z.string(),
    /** sandbox: the sampler scores episodes itself; judge: the server has them judged against their references. */
    reward: z.enum(['sandbox', 'judge']),
  }),
};

/** A micro task: everything in its folder (data, hidden eval, base model), CPU, minutes. */
const microTaskFileSchema = z.object({
  ...sharedFields,
  tier: z.literal('micro'),
  /** Agent-visible Python package of this task: folder and import name. */
  env: z.object({ dir: z.string(), package: z.string().regex(/^[a-z_][a-z0-9_]*$/) }),
  baseModel: z.string(),
  trainData: z.string(),
  evalData: z.string(),
  submission: z.object({
    requiredFiles: z.array(z.string()).min(1),
    maxBytes: z.number().int().positive(),
    maxFiles: z.number().int().positive(),
  }),
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
  /** The README table's figure: the base model's grade (public, private). */
  figures: z.object({ baseline: z.object({ public: z.number(), private: z.number() }) }),
});

/** A Hugging Face model id, <org>/<name>, as src/tasks/assets.ts and hflm.assets take it. */
const hfModelId = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/,
    'a Hugging Face model id, <org>/<name>, e.g. Qwen/Qwen2.5-1.5B-Instruct',
  )
  .refine((id) => !id.includes('..'), 'a Hugging Face model id has no ".."');

/**
 * A full-tier task (issue 17): the paper's task on a Hugging Face model. Its splits and base model are not in the
 * repository but prepared assets under the home (`a2rl prepare <id> [--model ID]`: assets/<id>/ with data/ visible and
 * eval/ hidden, models/<org>--<name>/), checked against their manifests when a run starts. Strict, so that a micro
 * field (trainData, model.pt, …) left in a full task is named rather than silently ignored.
 */
const fullTaskFileSchema = z
  .object({
    ...sharedFields,
    tier: z.literal('full'),
    /** The base model a run gets unless it names another with --model. */
    defaultModel: hfModelId,
    /** The GPU memory a run needs at defaultModel, as the README's full-tier table says it (scripts/task-table.mjs). */
    gpuMemory: z.string().min(1),
    /** What has run against the real upstream data and packages, and what only against fixtures and stand-ins (the same table). */
    upstreamStatus: z.string().min(1),
    /** The Python environment graders and jobs run in, relative to the package root; built by scripts/setup.sh. */
    runtime: z.literal('.venv-full'),
    submission: z
      .object({
        /** A Hugging Face model folder: a full model (config, *.safetensors, tokenizer) or a PEFT LoRA adapter of the base. */
        kind: z.literal('hf-model'),
        maxFiles: z.number().int().positive(),
      })
      .strict(),
    /**
     * Stand-ins for upstream environment packages the runtime may lack (tasks/<library>/standins/<name>: the upstream
     * module names and API over fixture data), each shown at lib/<name> unless the runtime has the real package.
     */
    standins: z.array(z.string().regex(/^[a-z_][a-z0-9_]*$/)).optional(),
    /**
     * The CPU smoke profile CI plays: this replay, on assets prepared from the fixture hub's smoke profile (a learnable
     * fixture, tasks/hflm-tests/fixture_hub.py) with its tiny `model`, submits a full model (output/full), which must beat
     * the baseline by `minImprovement` points, and, where `adapter` is given, a LoRA adapter (output/lora), which must be
     * graded and, where its `minImprovement` is given, beat the baseline by that. The adapter's path (hflm.submission's
     * merge) is the same for every task: a few tasks prove it, the others spare CI the minutes.
     */
    smoke: z
      .object({
        replay: z.string(),
        model: hfModelId,
        minImprovement: z.number().positive(),
        adapter: z.object({ minImprovement: z.number().positive().optional() }).strict().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

const taskFileSchema = z.discriminatedUnion('tier', [microTaskFileSchema, fullTaskFileSchema]);

export const tiers = ['micro', 'full'] as const;
export type Tier = (typeof tiers)[number];

export type TaskFile = z.infer<typeof taskFileSchema>;
export type MicroTaskFile = z.infer<typeof microTaskFileSchema>;
export type FullTaskFile = z.infer<typeof fullTaskFileSchema>;

/**
 * A task folder's task.json, validated. Every problem is named with its field path, so the message says what to fix;
 * a missing or unknown tier is named first, since it decides which fields the file needs.
 */
export function readTaskFile(dir: string): TaskFile {
  const path = join(dir, 'task.json');
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new A2rlError('INVALID_INPUT', `${path} is not readable JSON (${(error as Error).message}); fix the file.`);
  }
  const tier = (json as { tier?: unknown } | null)?.tier;
  if (!tiers.includes(tier as Tier)) {
    throw new A2rlError(
      'INVALID_INPUT',
      `${path}: "tier" is ${JSON.stringify(tier)}; give one of ${tiers.map((t) => `"${t}"`).join(', ')}.`,
    );
  }
  const parsed = taskFileSchema.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(top level)'}: ${issue.message}`);
    throw new A2rlError('INVALID_INPUT', `${path} is not a valid ${String(tier)}-tier task: ${problems.join('; ')}.`);
  }
  return parsed.data;
}

/** A Python package a task's sandboxes show under lib/ (the agent's workspace and the grader's), read-only. */
export interface TaskLibrary {
  /** Its import name: the folder under lib/. */
  name: string;
  source: string;
}

/** The Python a task's jobs and grader run, and what its sandboxes add for it. */
export interface TaskRuntime {
  /** The interpreter inside the sandbox. */
  python: string;
  mounts: Mount[];
  env: Record<string, string>;
}

/** What a task is to the server, whatever its tier: paths, hashes and the rules its sandboxes and submissions follow. */
interface ServedTask {
  dir: string;
  paths: {
    trainData: string;
    evalData: string;
    baseModel: string;
    grader: string;
    instructions: string;
  };
  libraries: TaskLibrary[];
  pythonRuntime: TaskRuntime;
  /** What the grading sandbox adds to its fixed layout, and the arguments the grader's entry gets besides it. */
  gradingInputs: { mounts: Mount[]; args: string[] };
  /** What a submitted checkpoint folder must hold, and its size limits; `launch_rollouts` takes what it requires too. */
  checkpoint: SnapshotLimits;
  /** The rollout sampler's arguments after the runtime's Python: its module and what the task adds to the common options. */
  rolloutSampler: string[];
  defaultLimits: BudgetLimits;
  /** Declared version plus a hash of everything that decides a score, so a changed grader or eval set never reuses old grades. */
  graderVersion: string;
  /** Content hash of the base model folder, as a submission of it would hash: the baseline grade's key. */
  baseModelHash: string;
}

/** A micro task as the server uses it: everything in its folder. */
export interface MicroTask extends MicroTaskFile, ServedTask {
  paths: ServedTask['paths'] & { library: string; env: string };
  /** The oracles' replay files, absolute, in the order of `oracles`. */
  oracleReplays: Array<{ route: OracleRoute; replay: string; minImprovement: number; rolloutEpisodes: number }>;
}

/** A full-tier task resolved for one home and base model (src/tasks/full-task.ts). */
export interface FullTask extends FullTaskFile, ServedTask {
  /** The run's base model, a Hugging Face id: the one given, else the task's defaultModel. */
  modelId: string;
  /**
   * What the task plays on, found once when it is resolved (src/grading/environment.ts records it in the grader
   * version): the package each stand-in (task.json `standins`) stood for, `stand-in` or `upstream:dist@version`, and
   * the sha256 of the assets manifest (every data file's sha256).
   */
  environment: { packages: Array<{ name: string; playedAs: string }>; assetsManifest: string };
}

export type Task = MicroTask | FullTask;

/** The task's libraries as a sandbox shows them: read-only under `<root>/lib/<name>`, with PYTHONPATH `<root>/lib`. */
export function libraryMounts(task: Task, root: string): Mount[] {
  return task.libraries.map((library) => ({ source: library.source, target: `${root}/lib/${library.name}`, readOnly: true }));
}

export const emptyLimits: BudgetLimits = { wallSeconds: 0, computeSeconds: 0, submissions: 0, rolloutEpisodes: 0 };

/** Micro tasks run Debian's Python (python3-torch) with their libraries on PYTHONPATH; nothing to mount. */
const microRuntime: TaskRuntime = { python: '/usr/bin/python3', mounts: [], env: {} };

/** Loads a micro task for serving. A full-tier task is resolved per run instead (resolveFullTask: its assets live under the home). */
export function loadTask(dir: string): MicroTask {
  const file = readTaskFile(dir);
  if (file.tier === 'full') {
    throw new A2rlError(
      'INVALID_INPUT',
      `${file.id} is a full-tier task: its assets live under the a2rl home (a2rl prepare ${file.id}) and a run resolves them; this call takes a micro task.`,
    );
  }
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
  const { requiredFiles, maxBytes, maxFiles } = file.submission;
  return {
    ...file,
    dir,
    paths,
    libraries: [
      { name: file.library, source: paths.library },
      { name: file.env.package, source: paths.env },
    ],
    pythonRuntime: microRuntime,
    rolloutSampler: ['-m', `${file.env.package}.rollouts`],
    gradingInputs: { mounts: [], args: [] },
    checkpoint: {
      maxBytes,
      maxFiles,
      required: requiredFiles.map((name) => [name]),
      holds: `${requiredFiles.join(' and ')} (save it with microlm.checkpoint.save)`,
    },
    oracleReplays,
    defaultLimits: parseBudget(file.defaultBudget, emptyLimits),
    graderVersion: `${file.grader.version}+${scoringHash}`,
    baseModelHash: hashDirectory(paths.baseModel),
  };
}

/** The tasks shipped in tasks/: every folder holding a task.json, or only those of one tier. */
export function listTaskIds(tier?: Tier): string[] {
  return readdirSync(tasksRoot, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(tasksRoot, entry.name, 'task.json')))
    .map((entry) => entry.name)
    .filter((id) => tier === undefined || readTaskFile(join(tasksRoot, id)).tier === tier)
    .sort();
}

const loaded = new Map<string, MicroTask>();

/** A shipped task's declaration, either tier; an unknown id is NOT_FOUND, listing the known ones. */
export function getTaskFile(id: string): TaskFile {
  const known = listTaskIds();
  if (!known.includes(id)) {
    throw new A2rlError('NOT_FOUND', `Unknown task "${id}". Available tasks: ${known.join(', ')}.`);
  }
  return readTaskFile(join(tasksRoot, id));
}

/** A shipped micro task, loaded once; a full-tier task is resolved per run (the engine's taskOf). */
export function getTask(id: string): MicroTask {
  let task = loaded.get(id);
  if (!task) {
    getTaskFile(id); // an unknown id: NOT_FOUND with the known ones
    task = loadTask(join(tasksRoot, id));
    loaded.set(id, task);
  }
  return task;
}
