import { errorText, jsonLines } from '../json-lines.js';
import type { ModelActivity } from '../model-activity.js';
import type { TokenUsage, TranscriptReader, TranscriptStep } from '../types.js';

/**
 * Gemini CLI's stream stats in the common counts. Its `input_tokens` are the prompts (cache included) and its
 * `output_tokens` the candidates only; its `total_tokens` also hold the thoughts (and tool-use prompts), which are
 * billed as output: what the total holds beyond prompt and candidates is counted as reasoning.
 */
export function geminiUsage(stats: Record<string, any> | undefined): TokenUsage | undefined {
  if (!stats || typeof stats.input_tokens !== 'number') return undefined;
  const candidates = stats.output_tokens ?? 0;
  const thoughts = Math.max(0, (stats.total_tokens ?? 0) - stats.input_tokens - candidates);
  return {
    inputTokens: stats.input_tokens,
    outputTokens: candidates + thoughts,
    cachedInputTokens: stats.cached ?? 0,
    reasoningTokens: thoughts,
  };
}

/**
 * Gemini CLI's `--output-format stream-json`: the prompt and the model's text as `message` events (the model's in
 * `delta` pieces, joined here), `tool_use` and `tool_result` events, and a closing `result` event whose `stats` hold the
 * session's tokens over every model it called. Gemini CLI reports no dollars: the price table prices its tokens.
 */
export const geminiCliTranscript: TranscriptReader = {
  read(text) {
    const steps: TranscriptStep[] = [];
    let model: string | undefined;
    let usage: TokenUsage | undefined;
    for (const event of jsonLines(text)) {
      const at = typeof event.timestamp === 'string' ? { at: event.timestamp } : {};
      if (event.type === 'init' && typeof event.model === 'string') model = event.model;
      else if (event.type === 'message') {
        const source = event.role === 'user' ? 'user' : 'agent';
        const last = steps.at(-1);
        // The model's text comes in pieces: one message step per run of them.
        if (event.delta && source === 'agent' && last?.kind === 'message' && last.source === undefined && !last.isError)
          last.text = `${last.text ?? ''}${event.content ?? ''}`;
        else steps.push({ ...at, kind: 'message', text: String(event.content ?? ''), ...(source === 'user' ? { source } : {}) });
      } else if (event.type === 'tool_use')
        steps.push({ ...at, kind: 'tool_call', tool: String(event.tool_name), arguments: event.parameters, callId: String(event.tool_id) });
      else if (event.type === 'tool_result') {
        const failed = event.status !== 'success';
        steps.push({
          ...at,
          kind: 'tool_result',
          callId: String(event.tool_id),
          text: String(failed ? (event.error?.message ?? event.output ?? '') : (event.output ?? '')),
          ...(failed ? { isError: true } : {}),
        });
      } else if (event.type === 'error') steps.push({ ...at, kind: 'message', text: String(event.message ?? ''), isError: true });
      else if (event.type === 'result') usage = geminiUsage(event.stats) ?? usage;
    }
    const tools = new Map(steps.filter((step) => step.kind === 'tool_call').map((step) => [step.callId, step.tool]));
    for (const step of steps) if (step.kind === 'tool_result' && tools.has(step.callId)) step.tool = tools.get(step.callId);
    return { steps, usage: usage ?? 'unknown', ...(model ? { model } : {}) };
  },
  // A model turn: an assistant message or a tool call. Errors it retries go to stderr only ("Attempt 2 failed with status 503…").
  modelActivity(transcript, stderr) {
    const activity: ModelActivity = { answered: false, lastError: undefined };
    for (const event of jsonLines(transcript)) {
      if ((event.type === 'message' && event.role === 'assistant') || event.type === 'tool_use') activity.answered = true;
      else if (event.type === 'error') activity.lastError = errorText(event.message);
      else if (event.type === 'result' && event.status === 'error') activity.lastError = errorText(event.error?.message);
    }
    const retried = stderr
      .split('\n')
      .filter((line) => /failed with status \d{3}/.test(line))
      .at(-1);
    if (activity.lastError === undefined && retried) activity.lastError = errorText(retried);
    return activity;
  },
};
