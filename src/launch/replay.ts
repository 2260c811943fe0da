import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { A2rlError } from '../util/errors.js';

/**
 * Scripted replays: one tool call per JSONL line, played through a real MCP client.
 *
 *   {"tool": "write_file", "arguments": {"path": "code/train.py", "content": {"$file": "train.py"}}}
 *   {"tool": "run_training", "arguments": {"command": "python3 code/train.py"}, "save": "train"}
 *   {"tool": "job_status", "arguments": {"job_id": "${train.job_id}", "wait_seconds": 30},
 *    "until": {"field": "jobs.0.state", "in": ["succeeded", "failed"]}, "timeout_s": 900,
 *    "expect": [{"field": "jobs.0.state", "equals": "succeeded"}]}
 *
 * - `arguments`: `{"$file": "x"}` is replaced by the text of x (relative to the replay file);
 *   `${name.path}` by a field of the structured result saved under `name` (a whole-string
 *   placeholder keeps the field's type).
 * - `until`: the call is repeated every `interval_s` (default 1) until the condition holds,
 *   for at most `timeout_s`.
 * - `expect`: conditions the final result must meet; `expect_error: true` expects a tool error.
 * Conditions name a dot path into the structured result and one of equals, in, gte, lte.
 */
const conditionSchema = z
  .object({
    field: z.string(),
    equals: z.unknown().optional(),
    in: z.array(z.unknown()).optional(),
    gte: z.number().optional(),
    lte: z.number().optional(),
  })
  .strict();

const stepSchema = z
  .object({
    tool: z.string(),
    arguments: z.record(z.string(), z.unknown()).default({}),
    comment: z.string().optional(),
    save: z.string().regex(/^\w+$/).optional(),
    until: conditionSchema.optional(),
    timeout_s: z.number().positive().default(900),
    interval_s: z.number().min(0).default(1),
    expect: z.union([conditionSchema, z.array(conditionSchema)]).default([]),
    expect_error: z.boolean().default(false),
  })
  .strict();

export type Condition = z.infer<typeof conditionSchema>;
export type ReplayStep = z.infer<typeof stepSchema> & { line: number };

export interface Replay {
  file: string;
  steps: ReplayStep[];
}

export function loadReplay(file: string): Replay {
  const steps: ReplayStep[] = [];
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((text, index) => {
      if (text.trim() === '') return;
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (error) {
        throw new A2rlError('INVALID_INPUT', `${file}:${index + 1} is not valid JSON (${(error as Error).message}).`);
      }
      const parsed = stepSchema.safeParse(json);
      if (!parsed.success)
        throw new A2rlError('INVALID_INPUT', `${file}:${index + 1} is not a replay step: ${z.prettifyError(parsed.error)}`);
      steps.push({ ...parsed.data, line: index + 1 });
    });
  return { file: resolve(file), steps };
}

export interface StepOutcome {
  step: ReplayStep;
  calls: number;
  durationMs: number;
  isError: boolean;
  text: string;
  structured: Record<string, unknown> | undefined;
}

export interface ReplayHooks {
  onStep?: (step: ReplayStep, index: number, total: number) => void;
  onProgress?: (step: ReplayStep, progress: Progress) => void;
  onResult?: (outcome: StepOutcome) => void;
}

export class ReplayFailure extends Error {
  override readonly name = 'ReplayFailure';
  constructor(
    readonly step: ReplayStep,
    message: string,
  ) {
    super(`replay line ${step.line} (${step.tool}): ${message}`);
  }
}

export function readField(value: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>(
      (current, key) => (current !== null && typeof current === 'object' ? (current as Record<string, unknown>)[key] : undefined),
      value,
    );
}

export function conditionHolds(value: unknown, condition: Condition): boolean {
  const actual = readField(value, condition.field);
  if ('equals' in condition && JSON.stringify(actual) !== JSON.stringify(condition.equals)) return false;
  if (condition.in && !condition.in.some((candidate) => JSON.stringify(candidate) === JSON.stringify(actual))) return false;
  if (condition.gte !== undefined && !(typeof actual === 'number' && actual >= condition.gte)) return false;
  if (condition.lte !== undefined && !(typeof actual === 'number' && actual <= condition.lte)) return false;
  return true;
}

/** The replay as JSONL with every `{"$file": …}` replaced by the file's text: a jailed replay agent reads nothing else. */
export function replayWithFilesInlined(replay: Replay): string {
  const inline = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(inline);
    if (value === null || typeof value !== 'object') return value;
    const record = value as Record<string, unknown>;
    if (Object.keys(record).length === 1 && typeof record.$file === 'string') {
      return readFileSync(resolve(dirname(replay.file), record.$file), 'utf8');
    }
    return Object.fromEntries(Object.entries(record).map(([key, item]) => [key, inline(item)]));
  };
  return replay.steps.map(({ line: _line, ...step }) => `${JSON.stringify({ ...step, arguments: inline(step.arguments) })}\n`).join('');
}

/** Substitutes `{"$file": …}` and `${name.path}` placeholders in a step's arguments. */
export function resolveArguments(value: unknown, saved: Record<string, unknown>, baseDir: string): unknown {
  if (typeof value === 'string') {
    const whole = /^\$\{([\w.]+)\}$/.exec(value);
    if (whole) return lookup(saved, whole[1]!);
    return value.replace(/\$\{([\w.]+)\}/g, (_, path: string) => String(lookup(saved, path)));
  }
  if (Array.isArray(value)) return value.map((item) => resolveArguments(item, saved, baseDir));
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    if (Object.keys(record).length === 1 && typeof record.$file === 'string') return readFileSync(resolve(baseDir, record.$file), 'utf8');
    return Object.fromEntries(Object.entries(record).map(([key, item]) => [key, resolveArguments(item, saved, baseDir)]));
  }
  return value;
}

function lookup(saved: Record<string, unknown>, path: string): unknown {
  const found = readField(saved, path);
  if (found === undefined)
    throw new A2rlError(
      'INVALID_INPUT',
      `placeholder \${${path}} names nothing saved so far (saved: ${Object.keys(saved).join(', ') || 'none'}).`,
    );
  return found;
}

/** Plays a replay through a connected client; throws ReplayFailure at the first unmet expectation. */
export async function playReplay(client: Client, replay: Replay, hooks: ReplayHooks = {}): Promise<StepOutcome[]> {
  const saved: Record<string, unknown> = {};
  const outcomes: StepOutcome[] = [];
  const baseDir = dirname(replay.file);
  for (const [index, step] of replay.steps.entries()) {
    hooks.onStep?.(step, index, replay.steps.length);
    const started = Date.now();
    const deadline = started + step.timeout_s * 1000;
    let calls = 0;
    let outcome: StepOutcome;
    for (;;) {
      const args = resolveArguments(step.arguments, saved, baseDir) as Record<string, unknown>;
      const result = await client.callTool({ name: step.tool, arguments: args }, undefined, {
        timeout: 120_000,
        resetTimeoutOnProgress: true,
        onprogress: (progress) => hooks.onProgress?.(step, progress),
      });
      calls += 1;
      const content = (result.content ?? []) as Array<{ type: string; text?: string }>;
      outcome = {
        step,
        calls,
        durationMs: Date.now() - started,
        isError: result.isError === true,
        text: content.find((c) => c.type === 'text')?.text ?? '',
        structured: result.structuredContent as Record<string, unknown> | undefined,
      };
      if (outcome.isError || !step.until || conditionHolds(outcome.structured, step.until)) break;
      if (Date.now() > deadline)
        throw new ReplayFailure(step, `"until" ${JSON.stringify(step.until)} still unmet after ${step.timeout_s} s`);
      await new Promise((resolve) => setTimeout(resolve, step.interval_s * 1000));
    }
    hooks.onResult?.(outcome);
    if (outcome.isError !== step.expect_error) {
      throw new ReplayFailure(step, step.expect_error ? 'expected a tool error, got a result' : `tool error: ${outcome.text}`);
    }
    for (const condition of [step.expect].flat()) {
      if (!conditionHolds(outcome.structured, condition)) {
        throw new ReplayFailure(
          step,
          `expected ${JSON.stringify(condition)}, got ${condition.field} = ${JSON.stringify(readField(outcome.structured, condition.field))}`,
        );
      }
    }
    if (step.save) saved[step.save] = outcome.structured;
    outcomes.push(outcome);
  }
  return outcomes;
}
