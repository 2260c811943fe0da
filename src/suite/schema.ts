import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { sandboxNames } from '../../sandbox/registry.js';
import { builtinAgent, commandFrom } from '../launch/agents.js';
import { checkAgentEnvName } from '../launch/environment.js';
import { parseBudget } from '../tasks/budget.js';
import { getTaskFile } from '../tasks/task.js';
import { A2rlError, isA2rlError } from '../util/errors.js';

/** yaml, loaded by the one command that reads a suite file rather than by every `a2rl` command's start. */
function parseYaml(text: string): unknown {
  return (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(text);
}

/**
 * A suite file: the paper's agent × model × task matrix as data (YAML or JSON). Every field is checked before anything
 * runs; an error names the field and what to write instead. Secrets never go in it: a model's API settings are the
 * NAMES of the variables the agent gets from the environment of `a2rl suite run`.
 */

/** A check that throws the project's error, turned into a zod issue on the field it is about. */
const checked =
  <T>(check: (value: T) => unknown) =>
  (value: T, context: z.RefinementCtx) => {
    try {
      check(value);
    } catch (error) {
      context.addIssue({ code: 'custom', message: isA2rlError(error) ? error.message : String(error) });
    }
  };

const budgetSpec = z
  .string()
  .superRefine(checked((spec: string) => parseBudget(spec, { wallSeconds: 1, computeSeconds: 1, submissions: 1, rolloutEpisodes: 1 })));

const variableNames = z
  .array(z.string().superRefine(checked(checkAgentEnvName)))
  .default([])
  .describe('names of variables of the environment the agent gets (NAME or PREFIX_*), never their values');

const modelSchema = z
  .object({
    name: z.string().min(1).describe('the driver model, passed to the agent as --model and recorded'),
    env: variableNames,
    args: z.array(z.string()).default([]).describe("the agent CLI's own arguments for this model (a provider, an effort level)"),
  })
  .strict();

const agentSchema = z
  .object({
    id: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'an id is letters, digits, ".", "_" or "-", e.g. claude-code or oracle-sft')
      .optional()
      .describe('names its rows and runs (default: the agent)'),
    agent: z.string().min(1).optional().describe('a launched CLI of a2rl run --agent: claude-code, codex, gemini-cli, …'),
    replay: z
      .union([z.string().min(1), z.record(z.string(), z.string().min(1))])
      .optional()
      .describe('a replay JSONL for every task, or one per task id'),
    command: z.string().min(1).optional().describe('any command that reads $A2RL_MCP_CONFIG and $A2RL_PROMPT'),
    models: z.array(modelSchema).default([]),
    env: variableNames,
    args: z.array(z.string()).default([]),
    bind: z
      .array(z.string())
      .default([])
      .describe("host paths the agent needs read-only in its jail (a command agent's code), relative to the suite file"),
  })
  .strict()
  .superRefine((agent, context) => {
    const kinds = (['agent', 'replay', 'command'] as const).filter((key) => agent[key] !== undefined);
    if (kinds.length !== 1) {
      context.addIssue({
        code: 'custom',
        message: `give exactly one of agent: (a CLI such as claude-code), replay: (a replay file) or command: (a command line); found ${kinds.length ? kinds.join(' and ') : 'none'}`,
      });
    }
    if (agent.replay !== undefined && agent.models.length > 0) {
      context.addIssue({ code: 'custom', path: ['models'], message: 'a replay has no driver model: drop models:' });
    }
  });

const taskSchema = z.union([
  z.string(),
  z
    .object({
      id: z.string(),
      budget: budgetSpec.optional().describe("this task's budget over its default, instead of the suite's"),
      base_model: z.string().optional().describe("a full-tier task's base model, a Hugging Face id"),
    })
    .strict(),
]);

const backendSchema = z
  .object({
    sandbox: z.enum(sandboxNames).default('bwrap'),
    transport: z.enum(['stdio', 'http']).default('stdio'),
    parallel: z.number().int().min(1).optional().describe("runs at once (default: this host's CPUs over a run's job CPUs)"),
    grace_seconds: z.number().positive().default(15),
    shared_root: z.string().optional(),
    slurm_partition: z.string().optional(),
    slurm_qos: z.string().optional(),
    slurm_grading_partition: z.string().optional(),
    slurm_grading_qos: z.string().optional(),
    slurm_conf: z.string().optional(),
    judge: z
      .object({
        url: z.string().url(),
        model: z.string().min(1),
        key_env: z.string().superRefine(checked(checkAgentEnvName)).optional(),
        annotator: z.string().optional(),
      })
      .strict()
      .optional()
      .describe("an LLM judge for judge-graded tasks (default: the task's rubric)"),
  })
  .strict()
  .superRefine((backend, context) => {
    if (backend.sandbox === 'slurm' && backend.parallel === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['parallel'],
        message: "a cluster's capacity is the cluster's: write how many runs may run at once, e.g. parallel: 32",
      });
    }
  });

const suiteSchema = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'a name is letters, digits, ".", "_" or "-", e.g. paper-matrix')
      .describe("the suite's id: its runs are labelled suite:<name>/<agent>[/<model>]"),
    agents: z.array(agentSchema).min(1),
    tasks: z.array(taskSchema).min(1),
    repeats: z.number().int().min(1).default(1),
    budget: budgetSpec.optional().describe("every run's budget over its task's default"),
    backend: backendSchema.default({ sandbox: 'bwrap', transport: 'stdio', grace_seconds: 15 }),
  })
  .strict();

export type SuiteFile = z.infer<typeof suiteSchema>;
export type SuiteAgent = SuiteFile['agents'][number];
export type SuiteBackend = SuiteFile['backend'];

export interface SuiteTask {
  id: string;
  budget?: string;
  baseModel?: string;
}

/** A suite as read: its file, its tasks normalised, replay paths resolved against the file's folder. */
export interface Suite extends Omit<SuiteFile, 'tasks'> {
  file: string;
  tasks: SuiteTask[];
}

/** A zod issue as one line: the field's path as the file writes it, then what is wrong. */
function issueLine(issue: z.core.$ZodIssue): string {
  const path = issue.path.map((part, index) => (typeof part === 'number' ? `[${part}]` : `${index ? '.' : ''}${String(part)}`)).join('');
  return `${path || '(the file)'}: ${issue.message}`;
}

/** Reads and checks a suite file; every problem is named in one error, with its field. */
export function loadSuite(file: string): Suite {
  const path = resolve(file);
  if (!existsSync(path)) throw new A2rlError('NOT_FOUND', `No suite file at ${path}; see suites/paper-matrix.example.yaml for one.`);
  let data: unknown;
  try {
    // YAML 1.2 is a superset of JSON: one parser reads both.
    data = parseYaml(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new A2rlError('INVALID_INPUT', `${path} is not YAML or JSON: ${(error as Error).message.split('\n')[0]}`);
  }
  const parsed = suiteSchema.safeParse(data);
  if (!parsed.success) {
    throw new A2rlError('INVALID_INPUT', `${path}: ${parsed.error.issues.map(issueLine).join('; ')}`);
  }
  return checkSuite(path, parsed.data);
}

/** What the schema cannot check alone: tasks and agent ids known and unique, replays present for every task. */
function checkSuite(path: string, suite: SuiteFile): Suite {
  const problems: string[] = [];
  const tasks = suite.tasks.map((task): SuiteTask => (typeof task === 'string' ? { id: task } : { ...task, baseModel: task.base_model }));
  tasks.forEach((task, index) => {
    try {
      getTaskFile(task.id);
    } catch (error) {
      problems.push(`tasks[${index}]: ${(error as Error).message}`);
    }
  });
  const duplicateTask = tasks.find((task, index) => tasks.findIndex((other) => other.id === task.id) !== index);
  if (duplicateTask) problems.push(`tasks: ${duplicateTask.id} is listed twice; list each task once (repeats: sets the runs per cell)`);
  const folder = dirname(path);
  const agents = suite.agents.map((agent, index) => {
    const replay =
      typeof agent.replay === 'string'
        ? resolve(folder, agent.replay)
        : agent.replay && Object.fromEntries(Object.entries(agent.replay).map(([task, file]) => [task, resolve(folder, file)]));
    if (replay && typeof replay === 'object') {
      const missing = tasks.filter((task) => !(task.id in replay)).map((task) => task.id);
      if (missing.length) {
        problems.push(`agents[${index}].replay: no replay for ${missing.join(', ')}; add one per task, or give one file for every task`);
      }
    }
    for (const file of typeof replay === 'string' ? [replay] : Object.values(replay ?? {})) {
      if (!existsSync(file)) problems.push(`agents[${index}].replay: no file at ${file} (paths are relative to the suite file)`);
    }
    // The launcher refuses these too, but only when its cell comes up: a suite is refused before its first run.
    const kind = agent.agent === undefined ? undefined : builtinAgent(agent.agent);
    for (const [field, args] of [
      ['args', agent.args],
      ...agent.models.map((model, m) => [`models[${m}].args`, model.args] as const),
    ] as const) {
      const named = kind?.modelArgument?.(args);
      if (named)
        problems.push(`agents[${index}].${field}: ${named} names the model, which the runs would not record; list it under models:`);
    }
    const bind = agent.bind.map((path) => resolve(folder, path));
    // Like replay: and bind:, a command's own ./ path is the suite file's.
    const command = agent.command === undefined ? {} : { command: commandFrom(folder, agent.command) };
    return { ...agent, id: agent.id ?? agent.agent ?? (agent.replay !== undefined ? 'replay' : 'command'), replay, bind, ...command };
  });
  const ids = agents.map((agent) => agent.id);
  const duplicateId = ids.find((id, index) => ids.indexOf(id) !== index);
  if (duplicateId) problems.push(`agents: two agents are named ${duplicateId}; give each its own id:`);
  if (problems.length) throw new A2rlError('INVALID_INPUT', `${path}: ${problems.join('; ')}`);
  return { ...suite, file: path, tasks, agents };
}
