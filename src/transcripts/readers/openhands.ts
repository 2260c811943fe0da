import { closeSync, fstatSync } from 'node:fs';
import { readAt, SafeDir } from '../../util/safe-fs.js';
import { errorText, type TranscriptText } from '../json-lines.js';
import type { ModelActivity } from '../model-activity.js';
import type { TokenUsage, TranscriptReader, TranscriptStep } from '../types.js';

/** The `kind` of the line a2rl appends to an OpenHands transcript: a conversation's `stats`, which OpenHands keeps off its stdout. */
const conversationStatsKind = 'a2rl.openhands_conversation_stats';

/** The most of a `base_state.json` read: a conversation's state is kilobytes; more is not OpenHands'. */
const maxStateBytes = 4 * 1024 * 1024;

/** The most conversations read: a run's OpenHands saves one per launch. */
const maxConversations = 1000;

/**
 * The text of the conversation `id`'s `base_state.json`, or undefined where the agent (it owns its HOME) left anything
 * else: a link, a FIFO or a device, a file over `maxStateBytes` (SafeDir: no link followed, no open that blocks).
 */
function conversationState(conversations: SafeDir, id: string): string | undefined {
  let folder: SafeDir | undefined;
  let fd: number;
  try {
    folder = conversations.child(id);
    fd = folder.openFile('base_state.json');
  } catch {
    return undefined;
  } finally {
    folder?.close();
  }
  try {
    return fstatSync(fd).size > maxStateBytes ? undefined : readAt(fd, 0, maxStateBytes).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * The token and dollar totals of the conversations OpenHands saved in `homeDir` (`~/.openhands/conversations/<id>/base_state.json`,
 * its `stats.usage_to_metrics`), one JSON line each, for the launcher to append to the transcript once OpenHands exited:
 * its `--json` events carry no usage. Empty when it saved none. Only real folders and regular files count
 * (`conversationState`); the launcher reads them as its own user, so it reads nothing the agent could not.
 */
export function openHandsStatsLines(homeDir: string): string {
  let conversations: SafeDir;
  try {
    conversations = SafeDir.withTrusted(homeDir, (home) => home.openDir(['.openhands', 'conversations']));
  } catch {
    return '';
  }
  let lines = '';
  try {
    for (const id of conversations.list(maxConversations).names) {
      const state = conversationState(conversations, id);
      if (state === undefined) continue;
      try {
        const stats = (JSON.parse(state) as { stats?: unknown }).stats;
        if (stats) lines += `${JSON.stringify({ kind: conversationStatsKind, conversation_id: id, stats })}\n`;
      } catch {
        // A state file cut short by the kill at the deadline: that conversation's usage stays unknown.
      }
    }
  } finally {
    conversations.close();
  }
  return lines;
}

/**
 * The JSON objects of OpenHands' stdout: one `Event.model_dump()` a line (CLI 1.x), or, in older CLIs, a
 * `--JSON Event--` line then the event pretty-printed over many lines; its other lines ("Agent is working", the
 * summary, "Conversation ID: …") are text.
 */
function* openHandsEvents(text: TranscriptText): Generator<Record<string, any>> {
  const lines = typeof text === 'string' ? text.split('\n') : text;
  let pending: string[] | undefined;
  for (const line of lines) {
    // A `{` at column 0 starts the next event (a block's own lines are indented): the pending block was cut by a kill.
    if (pending && line.startsWith('{')) pending = undefined;
    if (pending) {
      pending.push(line);
      if (line !== '}') continue;
      const block = pending.join('\n');
      pending = undefined;
      try {
        yield JSON.parse(block) as Record<string, any>;
      } catch {
        // An event cut at the deadline.
      }
    } else if (line.startsWith('{')) {
      try {
        yield JSON.parse(line) as Record<string, any>;
      } catch {
        if (line === '{') pending = [line];
      }
    }
  }
}

/** The text of an SDK content list (`TextContent` blocks, images named), or a string as it is. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((block) => (block?.type === 'text' ? String(block.text) : `[${block?.type ?? 'content'}]`)).join('\n');
}

/**
 * One conversation's usage in the common counts, summed over its LLMs (the agent's, a condenser's): LiteLLM's
 * `prompt_tokens` hold the cached ones and `completion_tokens` the reasoning ones. `accumulated_cost` is LiteLLM's
 * price, 0 for a model it does not price: then the dollars are left to the price table.
 */
function conversationUsage(stats: Record<string, any>): TokenUsage | undefined {
  const metrics = Object.values(stats?.usage_to_metrics ?? {}) as Array<Record<string, any>>;
  const tokens = metrics.map((m) => m?.accumulated_token_usage).filter((t) => typeof t?.prompt_tokens === 'number');
  if (tokens.length === 0) return undefined;
  const total = (key: string) => tokens.reduce((sum, t) => sum + (typeof t[key] === 'number' ? t[key] : 0), 0);
  const cost = metrics.reduce((sum, m) => sum + (typeof m?.accumulated_cost === 'number' ? m.accumulated_cost : 0), 0);
  return {
    inputTokens: total('prompt_tokens'),
    outputTokens: total('completion_tokens'),
    cachedInputTokens: total('cache_read_tokens'),
    cacheWriteInputTokens: total('cache_write_tokens'),
    reasoningTokens: total('reasoning_tokens'),
    ...(cost > 0 ? { costUsd: cost, costSource: 'agent' as const } : {}),
  };
}

function addUsage(total: TokenUsage | undefined, more: TokenUsage): TokenUsage {
  if (!total) return more;
  const sum = (key: 'inputTokens' | 'outputTokens' | 'cachedInputTokens' | 'cacheWriteInputTokens' | 'reasoningTokens') =>
    (total[key] ?? 0) + (more[key] ?? 0);
  const costUsd = total.costUsd !== undefined && more.costUsd !== undefined ? total.costUsd + more.costUsd : undefined;
  return {
    inputTokens: sum('inputTokens'),
    outputTokens: sum('outputTokens'),
    cachedInputTokens: sum('cachedInputTokens'),
    cacheWriteInputTokens: sum('cacheWriteInputTokens'),
    reasoningTokens: sum('reasoningTokens'),
    ...(costUsd !== undefined ? { costUsd, costSource: 'agent' as const } : {}),
  };
}

/**
 * OpenHands' `--headless --json` stdout (the OpenHands SDK's events, by their `kind`): `MessageEvent`s from the user
 * and the agent, an `ActionEvent` per tool call (its `tool_call.arguments` a JSON string) and the `ObservationEvent` or
 * `AgentErrorEvent` answering it, a `ConversationErrorEvent` when the run loop failed (a dead model API). Tokens and
 * dollars come from the conversation's saved `stats`, which the launcher appends (`openHandsStatsLines`); a transcript
 * without them has "unknown" usage.
 */
export const openHandsTranscript: TranscriptReader = {
  read(text) {
    const steps: TranscriptStep[] = [];
    let usage: TokenUsage | undefined;
    let model: string | undefined;
    for (const event of openHandsEvents(text)) {
      const at = typeof event.timestamp === 'string' ? { at: event.timestamp } : {};
      if (event.kind === 'MessageEvent') {
        const message = event.llm_message ?? {};
        if (message.reasoning_content) steps.push({ ...at, kind: 'reasoning', text: String(message.reasoning_content) });
        steps.push({
          ...at,
          kind: 'message',
          ...(event.source === 'user' ? { source: 'user' as const } : {}),
          text: contentText(message.content),
        });
      } else if (event.kind === 'ActionEvent') {
        if (event.reasoning_content) steps.push({ ...at, kind: 'reasoning', text: String(event.reasoning_content) });
        const thought = contentText(event.thought);
        if (thought) steps.push({ ...at, kind: 'message', text: thought });
        let args: unknown = event.tool_call?.arguments;
        try {
          if (typeof args === 'string') args = JSON.parse(args);
        } catch {
          // Arguments the model did not write as JSON: kept as it wrote them.
        }
        steps.push({ ...at, kind: 'tool_call', tool: String(event.tool_name), arguments: args, callId: String(event.tool_call_id) });
      } else if (event.kind === 'ObservationEvent' || event.kind === 'AgentErrorEvent' || event.kind === 'UserRejectObservation') {
        const observation = event.observation ?? {};
        const isError = event.kind !== 'ObservationEvent' || observation.is_error === true;
        steps.push({
          ...at,
          kind: 'tool_result',
          tool: String(event.tool_name),
          callId: String(event.tool_call_id),
          text: event.kind === 'ObservationEvent' ? contentText(observation.content) : String(event.error ?? event.rejection_reason ?? ''),
          ...(isError ? { isError: true } : {}),
        });
      } else if (event.kind === 'ConversationErrorEvent') {
        steps.push({ ...at, kind: 'message', text: `${event.code}: ${event.detail}`, isError: true });
      } else if (event.kind === conversationStatsKind) {
        const conversation = conversationUsage(event.stats);
        if (conversation) usage = addUsage(usage, conversation);
        const metrics = Object.values(event.stats?.usage_to_metrics ?? {}) as Array<Record<string, any>>;
        model ??= metrics.find((m) => typeof m?.model_name === 'string' && m.model_name)?.model_name;
      }
    }
    return { steps, usage: usage ?? 'unknown', ...(model ? { model } : {}) };
  },
  // A model turn: an event the agent's LLM wrote (a message or a tool call); a `ConversationErrorEvent` is the run
  // loop's failure, a dead model API's included (LiteLLM's error, with its status, in `detail`).
  modelActivity(transcript) {
    const activity: ModelActivity = { answered: false, lastError: undefined };
    for (const event of openHandsEvents(transcript)) {
      if (event.kind === 'ActionEvent' || (event.kind === 'MessageEvent' && event.source === 'agent')) activity.answered = true;
      else if (event.kind === 'ConversationErrorEvent') activity.lastError = errorText(`${event.code}: ${event.detail}`);
    }
    return activity;
  },
};
