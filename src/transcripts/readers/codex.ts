import { errorText, jsonLines } from '../json-lines.js';
import type { ModelActivity } from '../model-activity.js';
import type { TokenUsage, TranscriptReader, TranscriptStep } from '../types.js';

/** A tool call's result as text: its content's text blocks, else its structured content, else its error. */
function resultText(item: Record<string, any>): string {
  if (item.error?.message) return String(item.error.message);
  const content = item.result?.content;
  if (Array.isArray(content) && content.length)
    return content.map((block) => (block?.type === 'text' ? String(block.text) : `[${block?.type ?? 'content'}]`)).join('\n');
  if (item.result?.structured_content !== undefined) return JSON.stringify(item.result.structured_content);
  return '';
}

/** The steps of a completed item, or of a started one (`started`: the call alone; its result comes with `item.completed`). */
function itemSteps(item: Record<string, any>, started: boolean): TranscriptStep[] {
  const callId = String(item.id);
  switch (item.type) {
    case 'agent_message':
      return started ? [] : [{ kind: 'message', text: String(item.text ?? '') }];
    case 'reasoning':
      return started ? [] : [{ kind: 'reasoning', text: String(item.text ?? '') }];
    case 'mcp_tool_call': {
      const tool = `mcp__${item.server}__${item.tool}`;
      const call: TranscriptStep = { kind: 'tool_call', tool, arguments: item.arguments, callId };
      if (started) return [call];
      const failed = item.status === 'failed' || Boolean(item.error) || item.result?.is_error === true;
      return [call, { kind: 'tool_result', tool, callId, text: resultText(item), ...(failed ? { isError: true } : {}) }];
    }
    case 'command_execution': {
      const call: TranscriptStep = { kind: 'tool_call', tool: 'command_execution', arguments: { command: item.command }, callId };
      if (started) return [call];
      const failed = item.status === 'failed' || (typeof item.exit_code === 'number' && item.exit_code !== 0);
      const result: TranscriptStep = { kind: 'tool_result', tool: 'command_execution', callId, text: String(item.aggregated_output ?? '') };
      return [call, failed ? { ...result, isError: true } : result];
    }
    case 'error':
      return started ? [] : [{ kind: 'message', text: String(item.message ?? ''), isError: true }];
    default:
      // File changes, web searches, to-do lists: tools this benchmark turns off; kept as what they are.
      return started ? [] : [{ kind: 'message', text: `[${item.type}] ${JSON.stringify(item)}` }];
  }
}

/** Codex's usage of a turn; its `output_tokens` already hold the reasoning tokens, as the Responses API counts them. */
function codexUsage(usage: Record<string, any> | undefined): TokenUsage | undefined {
  if (!usage || typeof usage.input_tokens !== 'number') return undefined;
  return {
    inputTokens: usage.input_tokens,
    outputTokens: usage.output_tokens ?? 0,
    cachedInputTokens: usage.cached_input_tokens ?? 0,
    ...(typeof usage.reasoning_output_tokens === 'number' ? { reasoningTokens: usage.reasoning_output_tokens } : {}),
  };
}

const add = (a: number | undefined, b: number | undefined) => (a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0));

/**
 * Codex's `exec --json`: `item.started` / `item.completed` events for messages, reasoning and tool calls, and a
 * `turn.completed` event with the turn's token usage (an `exec` is one turn of many model responses). Codex reports
 * no dollars: the price table prices its tokens.
 */
export const codexTranscript: TranscriptReader = {
  read(text) {
    const steps: TranscriptStep[] = [];
    const started = new Set<string>();
    let usage: TokenUsage | undefined;
    for (const event of jsonLines(text)) {
      if (event.type === 'item.started' && event.item) {
        const stepsOfItem = itemSteps(event.item, true);
        if (stepsOfItem.length) started.add(String(event.item.id));
        steps.push(...stepsOfItem);
      } else if (event.type === 'item.completed' && event.item) {
        const stepsOfItem = itemSteps(event.item, false);
        // A call already shown when it started: only its result now.
        steps.push(...(started.has(String(event.item.id)) ? stepsOfItem.filter((step) => step.kind !== 'tool_call') : stepsOfItem));
      } else if (event.type === 'turn.completed') {
        const turn = codexUsage(event.usage);
        if (turn) {
          usage = {
            inputTokens: add(usage?.inputTokens, turn.inputTokens),
            outputTokens: add(usage?.outputTokens, turn.outputTokens),
            cachedInputTokens: add(usage?.cachedInputTokens, turn.cachedInputTokens),
            ...(add(usage?.reasoningTokens, turn.reasoningTokens) !== undefined
              ? { reasoningTokens: add(usage?.reasoningTokens, turn.reasoningTokens) }
              : {}),
          };
        }
      }
    }
    return { steps, usage: usage ?? 'unknown' };
  },
  // A model turn: a completed turn, or any completed item (a message, a tool call); errors are events of their own.
  modelActivity(transcript) {
    const activity: ModelActivity = { answered: false, lastError: undefined };
    for (const event of jsonLines(transcript)) {
      if (event.type === 'turn.completed' || (event.type === 'item.completed' && event.item?.type !== 'error')) activity.answered = true;
      else if (event.type === 'error') activity.lastError = errorText(event.message);
      else if (event.type === 'turn.failed') activity.lastError = errorText(event.error?.message);
      else if (event.type === 'item.completed') activity.lastError = errorText(event.item.message);
    }
    return activity;
  },
};
