import { errorText, jsonLines } from '../json-lines.js';
import type { ModelActivity } from '../model-activity.js';
import type { TokenUsage, TranscriptReader, TranscriptStep } from '../types.js';

/**
 * A `step_finish` event's tokens and dollars in the common counts. OpenCode's `input` leaves out the cache's reads and
 * writes, and its `output` the reasoning tokens; its `cost` is its own figure from its model list (0 for a model it does
 * not price, which is left to the price table).
 */
export function openCodeUsage(part: Record<string, any> | undefined): TokenUsage | undefined {
  const tokens = part?.tokens;
  if (!tokens || typeof tokens.input !== 'number') return undefined;
  const cacheRead = tokens.cache?.read ?? 0;
  const cacheWrite = tokens.cache?.write ?? 0;
  const reasoning = tokens.reasoning ?? 0;
  return {
    inputTokens: tokens.input + cacheRead + cacheWrite,
    outputTokens: (tokens.output ?? 0) + reasoning,
    cachedInputTokens: cacheRead,
    cacheWriteInputTokens: cacheWrite,
    reasoningTokens: reasoning,
    ...(typeof part.cost === 'number' && part.cost > 0 ? { costUsd: part.cost, costSource: 'agent' as const } : {}),
  };
}

const sum = (a: number | undefined, b: number | undefined) => (a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0));

function added(total: TokenUsage | undefined, step: TokenUsage): TokenUsage {
  const keys = ['inputTokens', 'outputTokens', 'cachedInputTokens', 'cacheWriteInputTokens', 'reasoningTokens', 'costUsd'] as const;
  const result: TokenUsage = {};
  for (const key of keys) {
    const value = sum(total?.[key], step[key]);
    if (value !== undefined) result[key] = value;
  }
  // Dollars only where OpenCode priced every step: a sum with unpriced steps would read as a whole run's cost.
  if (total && (total.costUsd === undefined) !== (step.costUsd === undefined)) delete result.costUsd;
  if (result.costUsd !== undefined) result.costSource = 'agent';
  return result;
}

/** An `error` event's words: its API error's message (with its HTTP status), else its name. */
function errorOf(error: Record<string, any> | undefined): string {
  const data = error?.data ?? {};
  const status = typeof data.statusCode === 'number' ? `HTTP ${data.statusCode}: ` : '';
  return `${status}${String(data.message ?? error?.message ?? error?.name ?? 'an error')}`;
}

/**
 * OpenCode's `run --format json`: one event a line, each with a message `part`: `text` and `reasoning` parts, a
 * `tool_use` part per finished tool call (its input, its output or error), and a `step_finish` part per model response
 * with that response's `tokens` and `cost`; an `error` event when the model API failed (a 401 ends the run, no retry).
 */
export const openCodeTranscript: TranscriptReader = {
  read(text) {
    const steps: TranscriptStep[] = [];
    let usage: TokenUsage | undefined;
    let turns = 0;
    for (const event of jsonLines(text)) {
      const at = typeof event.timestamp === 'number' ? { at: new Date(event.timestamp).toISOString() } : {};
      const part = event.part ?? {};
      if (event.type === 'text') steps.push({ ...at, kind: 'message', text: String(part.text ?? '') });
      else if (event.type === 'reasoning') steps.push({ ...at, kind: 'reasoning', text: String(part.text ?? '') });
      else if (event.type === 'tool_use') {
        const callId = String(part.callID ?? part.id);
        const tool = String(part.tool);
        const state = part.state ?? {};
        const failed = state.status === 'error';
        steps.push({ ...at, kind: 'tool_call', tool, arguments: state.input, callId });
        steps.push({
          ...at,
          kind: 'tool_result',
          tool,
          callId,
          text: String(failed ? (state.error ?? '') : (state.output ?? '')),
          ...(failed ? { isError: true } : {}),
        });
      } else if (event.type === 'step_finish') {
        turns++;
        const step = openCodeUsage(part);
        if (step) usage = added(usage, step);
      } else if (event.type === 'error') steps.push({ ...at, kind: 'message', text: errorOf(event.error), isError: true });
    }
    return { steps, usage: usage ?? 'unknown', turns };
  },
  // A model turn: a finished step (a response). A call that failed for good is an `error` event (a 401 ends the run at
  // once); one it retries (a 503) is only in its log, which `--print-logs` puts on stderr: `message="stream error" … error.error="…"`.
  modelActivity(transcript, stderr) {
    const activity: ModelActivity = { answered: false, lastError: undefined };
    for (const event of jsonLines(transcript)) {
      if (event.type === 'step_finish' || event.type === 'text' || event.type === 'tool_use') activity.answered = true;
      else if (event.type === 'error') activity.lastError = errorText(errorOf(event.error));
    }
    const retried = [...stderr.matchAll(/message="stream error".*?error\.error="((?:[^"\\]|\\.)*)"/g)].at(-1)?.[1];
    if (activity.lastError === undefined && retried) activity.lastError = errorText(retried);
    return activity;
  },
};
