import { errorText, jsonLines } from '../json-lines.js';
import type { ModelActivity } from '../model-activity.js';
import type { TokenUsage, TranscriptReader, TranscriptStep } from '../types.js';

/**
 * Qwen Code's usage in the common counts: as the OpenAI API reports it, its `input_tokens` hold the cached ones
 * (`cache_read_input_tokens`) and its `output_tokens` the reasoning ones.
 */
export function qwenUsage(usage: Record<string, any> | undefined): TokenUsage | undefined {
  if (!usage || typeof usage.input_tokens !== 'number') return undefined;
  return {
    inputTokens: usage.input_tokens,
    outputTokens: usage.output_tokens ?? 0,
    cachedInputTokens: usage.cache_read_input_tokens ?? 0,
    ...(typeof usage.reasoning_tokens === 'number' ? { reasoningTokens: usage.reasoning_tokens } : {}),
  };
}

/** A tool result's content: a string, or text blocks (other blocks named by their type). */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((block) => (block?.type === 'text' ? String(block.text) : `[${block?.type ?? 'content'}]`)).join('\n');
}

/**
 * Qwen Code's `--output-format stream-json` (Claude Code's event shapes): a `system` `init` event naming its tools and
 * model, one `assistant` event per model response (its content blocks and that response's usage), `user` events
 * carrying tool results, and a closing `result` event with the session's usage. Qwen Code reports no dollars: the price
 * table prices its tokens. A run stopped before `result` has no totals.
 */
export const qwenCodeTranscript: TranscriptReader = {
  read(text) {
    const steps: TranscriptStep[] = [];
    let model: string | undefined;
    let usage: TokenUsage | 'unknown' = 'unknown';
    let turns = 0;
    for (const event of jsonLines(text)) {
      if (event.type === 'system' && event.subtype === 'init' && typeof event.model === 'string') model = event.model;
      else if (event.type === 'assistant') {
        turns++;
        const message = event.message ?? {};
        for (const [index, block] of (Array.isArray(message.content) ? message.content : []).entries()) {
          const step: TranscriptStep | undefined =
            block?.type === 'text'
              ? { kind: 'message', text: String(block.text) }
              : block?.type === 'thinking'
                ? { kind: 'reasoning', text: String(block.thinking ?? '') }
                : block?.type === 'tool_use'
                  ? { kind: 'tool_call', tool: String(block.name), arguments: block.input, callId: String(block.id) }
                  : undefined;
          if (!step) continue;
          const response = index === 0 ? qwenUsage(message.usage) : undefined;
          steps.push(response ? { ...step, usage: response } : step);
        }
      } else if (event.type === 'user' && Array.isArray(event.message?.content)) {
        for (const block of event.message.content) {
          if (block?.type !== 'tool_result') continue;
          steps.push({
            kind: 'tool_result',
            callId: String(block.tool_use_id),
            text: resultText(block.content),
            ...(block.is_error ? { isError: true } : {}),
          });
        }
      } else if (event.type === 'result') usage = qwenUsage(event.usage) ?? usage;
    }
    const tools = new Map(steps.filter((step) => step.kind === 'tool_call').map((step) => [step.callId, step.tool]));
    for (const step of steps) if (step.kind === 'tool_result' && tools.has(step.callId)) step.tool = tools.get(step.callId);
    return { steps, usage, turns, ...(model ? { model } : {}) };
  },
  // A model turn: an assistant event, unless it is Qwen Code's report of a failed call ("[API Error: 401 …]"), after
  // which an error `result` ends the run. A call it retries (a 503) leaves no trace in the transcript or on stderr.
  modelActivity(transcript) {
    const activity: ModelActivity = { answered: false, lastError: undefined };
    for (const event of jsonLines(transcript)) {
      const content = event.message?.content;
      const apiError =
        Array.isArray(content) && content.length === 1 && /^\[API Error\b/.test(String(content[0]?.text ?? ''))
          ? content[0].text
          : undefined;
      if (event.type === 'assistant' && apiError) activity.lastError = errorText(apiError);
      else if (event.type === 'assistant') activity.answered = true;
      else if (event.type === 'result' && event.is_error)
        activity.lastError = errorText(event.error?.message ?? event.result ?? event.subtype ?? 'an API error');
    }
    return activity;
  },
};
