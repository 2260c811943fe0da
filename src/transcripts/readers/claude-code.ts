import { errorText, jsonLines } from '../json-lines.js';
import type { ModelActivity } from '../model-activity.js';
import type { TokenUsage, TranscriptReader, TranscriptStep } from '../types.js';

/** Anthropic's usage object in the common counts: its `input_tokens` leave out the cache's reads and writes. */
export function anthropicUsage(usage: Record<string, any> | undefined): TokenUsage | undefined {
  if (!usage || typeof usage.input_tokens !== 'number') return undefined;
  const cacheRead = usage.cache_read_input_tokens ?? 0;
  const cacheWrite = usage.cache_creation_input_tokens ?? 0;
  const thinking = usage.output_tokens_details?.thinking_tokens;
  return {
    inputTokens: usage.input_tokens + cacheRead + cacheWrite,
    outputTokens: usage.output_tokens ?? 0,
    cachedInputTokens: cacheRead,
    cacheWriteInputTokens: cacheWrite,
    ...(typeof thinking === 'number' ? { reasoningTokens: thinking } : {}),
  };
}

/**
 * A response's prompt side: stream-json shows a message's usage as the API reported it when the message started, when
 * only its first output token was counted, so its output tokens are left out (the run's totals have them).
 */
function promptUsage(usage: Record<string, any> | undefined): TokenUsage | undefined {
  const counts = anthropicUsage(usage);
  if (!counts) return undefined;
  const { outputTokens: _started, ...prompt } = counts;
  return prompt;
}

/** A tool result's content: a string, or text blocks (other blocks, images, named by their type). */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((block) => (block?.type === 'text' ? String(block.text) : `[${block?.type ?? 'content'}]`)).join('\n');
}

/**
 * Whether Claude Code priced every model of the run from a price table: its `modelUsage` says per model
 * (`costBasis`: "list", "managed", or "unknown" when it guessed at a default model's rate for a model it does not know).
 */
function pricedByClaudeCode(result: Record<string, any>): boolean {
  const models = Object.values((result.modelUsage ?? {}) as Record<string, { costBasis?: string }>);
  return models.every((model) => model.costBasis !== 'unknown');
}

/**
 * Claude Code's `--output-format stream-json --verbose`: `assistant` events (one per content block, each with its
 * message's id and the usage its API reported when the message started), `user` events carrying tool results, and a
 * closing `result` event with the run's `usage` and `total_cost_usd`. Its cost is taken where Claude Code priced the
 * model from a table; a guess (`costBasis: "unknown"`) is left out, for the price table. A run stopped before `result`
 * has no totals.
 */
export const claudeCodeTranscript: TranscriptReader = {
  read(text) {
    const steps: TranscriptStep[] = [];
    const responses = new Set<string>();
    let model: string | undefined;
    let usage: TokenUsage | 'unknown' = 'unknown';
    for (const event of jsonLines(text)) {
      const at = typeof event.timestamp === 'string' ? { at: event.timestamp } : {};
      if (event.type === 'system' && event.subtype === 'init' && typeof event.model === 'string') model = event.model;
      else if (event.type === 'assistant') {
        const message = event.message ?? {};
        const synthetic = message.model === '<synthetic>';
        // Its usage goes with the first step of each response.
        const first = !synthetic && typeof message.id === 'string' && !responses.has(message.id);
        if (first) responses.add(message.id);
        for (const [index, block] of (Array.isArray(message.content) ? message.content : []).entries()) {
          const step: TranscriptStep | undefined =
            block?.type === 'text'
              ? { ...at, kind: 'message', text: String(block.text), ...(synthetic ? { isError: true } : {}) }
              : block?.type === 'thinking'
                ? { ...at, kind: 'reasoning', text: String(block.thinking ?? '') }
                : block?.type === 'tool_use'
                  ? { ...at, kind: 'tool_call', tool: String(block.name), arguments: block.input, callId: String(block.id) }
                  : undefined;
          if (!step) continue;
          const stepUsage = first && index === 0 ? promptUsage(message.usage) : undefined;
          steps.push(stepUsage ? { ...step, usage: stepUsage } : step);
        }
      } else if (event.type === 'user' && Array.isArray(event.message?.content)) {
        for (const block of event.message.content) {
          if (block?.type !== 'tool_result') continue;
          steps.push({
            ...at,
            kind: 'tool_result',
            callId: String(block.tool_use_id),
            text: resultText(block.content),
            ...(block.is_error ? { isError: true } : {}),
          });
        }
      } else if (event.type === 'result') {
        const totals = anthropicUsage(event.usage);
        if (totals) {
          usage =
            typeof event.total_cost_usd === 'number' && pricedByClaudeCode(event)
              ? { ...totals, costUsd: event.total_cost_usd, costSource: 'agent' }
              : totals;
        }
      }
    }
    // Each tool result names its call: give it the call's tool.
    const tools = new Map(steps.filter((step) => step.kind === 'tool_call').map((step) => [step.callId, step.tool]));
    for (const step of steps) if (step.kind === 'tool_result' && tools.has(step.callId)) step.tool = tools.get(step.callId);
    return { steps, usage, turns: responses.size, ...(model ? { model } : {}) };
  },
  // A model turn: an assistant message from the model; an API error is reported as a "<synthetic>" one.
  modelActivity(transcript) {
    const activity: ModelActivity = { answered: false, lastError: undefined };
    for (const event of jsonLines(transcript)) {
      if (event.type === 'assistant' && event.message?.model !== '<synthetic>') activity.answered = true;
      else if (event.type === 'assistant') activity.lastError = errorText(event.message?.content?.[0]?.text ?? 'an API error');
      else if (event.type === 'system' && event.subtype === 'api_retry')
        activity.lastError = errorText(`HTTP ${event.error_status ?? 'error'} (${event.error ?? 'unknown'}), retry ${event.attempt}`);
      else if (event.type === 'result' && event.is_error) activity.lastError = errorText(event.result ?? event.subtype);
    }
    return activity;
  },
};
