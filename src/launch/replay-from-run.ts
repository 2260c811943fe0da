import { A2rlError } from '../util/errors.js';
import type { Condition } from './replay.js';
import { finishedJobStates, type Store } from '../store/store.js';

interface RecordedCall {
  tool: string;
  arguments: Record<string, unknown>;
  result?: unknown;
  error?: string;
  at: number;
}

/** One line of a replay file, as `loadReplay` reads it. */
export interface ReplayLine {
  tool: string;
  arguments: Record<string, unknown>;
  comment?: string;
  save?: string;
  until?: Condition;
  timeout_s?: number;
  expect?: Condition[];
  expect_error?: boolean;
}

const finishedSubmissionStates = ['graded', 'failed'];

/**
 * Turns a recorded run (its tool-call events) back into a replay, so that what any agent
 * did can be played against another server:
 * - ids the server returned (`job_id`, `submission_id`, …) become `${name.path}`
 *   placeholders pointing at the call that first returned them, saved under a name;
 * - repeated identical calls (an agent polling) become one call, and a wait that ended with
 *   a job or grading finished becomes an `until` condition on that state, with the
 *   recorded outcome as an expectation;
 * - calls that failed are expected to fail again.
 */
export function runToReplay(store: Store, runId: string): ReplayLine[] {
  const run = store.getRun(runId);
  if (!run) throw new A2rlError('NOT_FOUND', `No run "${runId}"; list runs with a2rl runs list.`);
  const calls: RecordedCall[] = store.listEvents(runId, 'tool').map((event) => ({
    tool: event.name,
    at: event.at,
    ...(JSON.parse(event.data) as Omit<RecordedCall, 'tool' | 'at'>),
  }));
  if (calls.length === 0) throw new A2rlError('NOT_FOUND', `Run ${runId} recorded no tool calls; there is nothing to replay.`);
  const placeholders = new Map<string, string>();
  const lines: Array<ReplayLine & { firstAt: number; lastAt: number }> = [];
  for (const call of calls) {
    const args = withPlaceholders(call.arguments ?? {}, placeholders) as Record<string, unknown>;
    const previous = lines.at(-1);
    const line: ReplayLine & { firstAt: number; lastAt: number } =
      previous && previous.tool === call.tool && previous.save === undefined && JSON.stringify(previous.arguments) === JSON.stringify(args)
        ? lines.pop()!
        : { tool: call.tool, arguments: args, firstAt: call.at, lastAt: call.at };
    line.lastAt = call.at;
    delete line.until;
    delete line.expect;
    delete line.expect_error;
    delete line.timeout_s;
    if (call.error !== undefined) line.expect_error = true;
    else addWait(line, call);
    const ids = returnedIds(call.result).filter(([, value]) => !placeholders.has(value));
    if (ids.length > 0) {
      line.save = `${call.tool}_${lines.length + 1}`;
      for (const [path, value] of ids) placeholders.set(value, `\${${line.save}.${path}}`);
    }
    lines.push(line);
  }
  const text = JSON.stringify(lines);
  return lines.map(({ firstAt, lastAt, ...line }) => {
    // A wait gets room for the recorded wait three times over, and at least 15 minutes.
    if (line.until) line.timeout_s = Math.max(900, Math.ceil((3 * (lastAt - firstAt)) / 1000));
    if (line.save && !text.includes(`\${${line.save}.`)) delete line.save;
    return line;
  });
}

/** A wait on a job or a grading that ended: repeat the call until it ends, and expect the recorded outcome. */
function addWait(line: ReplayLine, call: RecordedCall): void {
  const result = call.result as Record<string, any> | undefined;
  if (call.tool === 'job_status' && typeof call.arguments.job_id === 'string') {
    const state = result?.jobs?.[0]?.state;
    if (typeof state !== 'string' || !finishedJobStates.includes(state as never)) return;
    line.until = { field: 'jobs.0.state', in: [...finishedJobStates] };
    line.expect = [{ field: 'jobs.0.state', equals: state }];
  } else if (call.tool === 'get_score' && typeof call.arguments.submission_id === 'string') {
    const state = result?.submissions?.[0]?.state;
    if (!finishedSubmissionStates.includes(state)) return;
    line.until = { field: 'submissions.0.state', in: finishedSubmissionStates };
    line.expect = [{ field: 'submissions.0.state', equals: state }];
  } else if (call.tool === 'get_score' && result?.baseline?.state === 'graded') {
    line.until = { field: 'baseline.state', equals: 'graded' };
  }
}

/** Ids that are not placeholders: the run's (no tool takes it) and the task's (the same on every server). */
const fixedIds = new Set(['run_id', 'task_id']);

/** `[path, id]` of every string under a key ending in `_id` that a server assigns (jobs, submissions, …). */
function returnedIds(value: unknown, path: string[] = []): Array<[string, string]> {
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value as Record<string, unknown>).flatMap(([key, item]) => {
    const here = [...path, key];
    if (typeof item === 'string' && key.endsWith('_id') && !fixedIds.has(key)) return [[here.join('.'), item] as [string, string]];
    return returnedIds(item, here);
  });
}

function withPlaceholders(value: unknown, placeholders: Map<string, string>): unknown {
  if (typeof value === 'string') return placeholders.get(value) ?? value;
  if (Array.isArray(value)) return value.map((item) => withPlaceholders(item, placeholders));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, withPlaceholders(item, placeholders)]));
  }
  return value;
}

export function formatReplay(lines: ReplayLine[]): string {
  return lines.map((line) => JSON.stringify(line)).join('\n') + '\n';
}
