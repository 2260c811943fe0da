import { statSync } from 'node:fs';
import type { Store } from '../store/store.js';
import { fileLines } from './json-lines.js';
import { type PriceTable, pricedUsage, priceTables } from './prices.js';
import { readTranscript, type Transcript } from './transcript.js';

/** What a run's agent spent, as its report, export and leaderboard show it: "unknown" where its transcript does not say, never 0. */
export interface RunUsage {
  agent: string | null;
  /** The model the transcript names, else the run's driver model. */
  model: string | null;
  /** The transcript it was read from; null for a run no launcher started (an operator's own client). */
  transcript: string | null;
  turns: number | 'unknown';
  tool_calls: number | 'unknown';
  input_tokens: number | 'unknown';
  cached_input_tokens: number | 'unknown';
  output_tokens: number | 'unknown';
  reasoning_tokens: number | 'unknown';
  cost_usd: number | 'unknown';
  /** `agent`: the CLI's own figure; `price-table`: its tokens priced from `price_table`. */
  cost_source: 'agent' | 'price-table' | null;
  price_table: string | null;
}

/**
 * The transcript read last, kept while its file is unchanged: a run's export reads it three times (usage, timeline,
 * ATIF). One only: a leaderboard reads every run's, and keeping them all would hold every transcript in memory.
 */
let lastRead: { path: string; size: number; mtimeMs: number; transcript: Transcript } | undefined;

/** Where `a2rl run` saved the run's transcript, and which agent wrote it: its `agent/launched` event. */
function launchedAgent(store: Store, runId: string): { agent: string; transcript: string } | undefined {
  const launched = store.listEvents(runId, 'agent').find((event) => event.name === 'launched');
  return launched ? (JSON.parse(launched.data) as { agent: string; transcript: string }) : undefined;
}

/** The run's transcript in the common shape; undefined for a run no launcher started or whose file is gone. */
export function runTranscript(store: Store, runId: string): (Transcript & { path: string }) | undefined {
  const agent = launchedAgent(store, runId);
  if (!agent) return undefined;
  let stat;
  try {
    stat = statSync(agent.transcript);
  } catch {
    return undefined;
  }
  const known = lastRead;
  if (known && known.path === agent.transcript && known.size === stat.size && known.mtimeMs === stat.mtimeMs)
    return { ...known.transcript, path: agent.transcript };
  // Line by line: a transcript may be larger than one string can hold.
  const transcript = readTranscript(agent.agent, fileLines(agent.transcript));
  lastRead = { path: agent.transcript, size: stat.size, mtimeMs: stat.mtimeMs, transcript };
  return { ...transcript, path: agent.transcript };
}

/** A run's tokens, dollars, turns and tool calls, from its agent's transcript, priced with `prices` (the operator's table) where the agent gave no dollars. */
export function runUsage(store: Store, runId: string, prices?: PriceTable): RunUsage {
  const run = store.getRun(runId);
  const transcript = runTranscript(store, runId);
  const model = transcript?.model ?? run?.driver_model ?? null;
  const usage =
    transcript && transcript.usage !== 'unknown' ? pricedUsage(transcript.usage, model ?? undefined, priceTables(prices)) : undefined;
  const known = (value: number | undefined) => value ?? 'unknown';
  return {
    agent: transcript?.agent ?? run?.agent ?? null,
    model,
    transcript: transcript?.path ?? null,
    turns: transcript ? transcript.turns : 'unknown',
    tool_calls: transcript ? transcript.toolCalls : 'unknown',
    input_tokens: known(usage?.inputTokens),
    cached_input_tokens: known(usage?.cachedInputTokens),
    output_tokens: known(usage?.outputTokens),
    reasoning_tokens: known(usage?.reasoningTokens),
    cost_usd: known(usage?.costUsd),
    cost_source: usage?.costSource ?? null,
    price_table: usage && 'priceTable' in usage ? (usage.priceTable ?? null) : null,
  };
}

/** Input plus output tokens, or "unknown". */
export const totalTokens = (usage: RunUsage): number | 'unknown' =>
  usage.input_tokens === 'unknown' || usage.output_tokens === 'unknown' ? 'unknown' : usage.input_tokens + usage.output_tokens;
