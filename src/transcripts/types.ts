import type { TranscriptText } from './json-lines.js';
import type { ModelActivity } from './model-activity.js';

/**
 * Tokens and dollars, as one agent CLI reported them. The counts mean the same for every CLI:
 * `inputTokens` is the whole prompt, cached part included; `outputTokens` everything generated, reasoning included.
 */
export interface TokenUsage {
  inputTokens?: number;
  outputTokens?: number;
  /** The part of `inputTokens` read from the provider's prompt cache. */
  cachedInputTokens?: number;
  /** The part of `inputTokens` written to the prompt cache (Anthropic bills it apart). */
  cacheWriteInputTokens?: number;
  /** The part of `outputTokens` spent reasoning. */
  reasoningTokens?: number;
  costUsd?: number;
  /** Where `costUsd` came from: the agent CLI's own figure, or the operator's price table (`src/transcripts/prices.ts`). */
  costSource?: 'agent' | 'price-table';
}

/** One thing the agent did: said something, reasoned, called a tool or got its result. */
export interface TranscriptStep {
  /** ISO 8601 time where the CLI records one. */
  at?: string;
  kind: 'message' | 'reasoning' | 'tool_call' | 'tool_result';
  /** Who said it: the agent (the default) or the user (the prompt). */
  source?: 'user' | 'agent';
  text?: string;
  /** The tool's name as the agent called it (`mcp__a2rl__exec`, `mcp_a2rl_exec`, `exec`). */
  tool?: string;
  arguments?: unknown;
  /** Pairs a tool call with its result. */
  callId?: string;
  isError?: boolean;
  /** The model response this step is part of, where the CLI reports usage per response (on its first step). */
  usage?: TokenUsage;
}

/** An agent's transcript in one shape, whichever CLI wrote it. */
export interface Transcript {
  agent: string;
  steps: TranscriptStep[];
  /** The run's totals; "unknown" when the transcript reports none, never zeros. */
  usage: TokenUsage | 'unknown';
  /** Model responses: runs of the agent's steps between tool results (`countTurns`). */
  turns: number;
  toolCalls: number;
  /** The driver model the transcript names. */
  model?: string;
}

/** What a per-CLI reader makes of a transcript; `readTranscript` adds the agent and the counts it leaves out. */
export type TranscriptReading = Omit<Transcript, 'agent' | 'turns' | 'toolCalls'> & Partial<Pick<Transcript, 'turns' | 'toolCalls'>>;

/** Reads one agent CLI's transcript format (`AgentKind.transcript`). */
export interface TranscriptReader {
  read(text: TranscriptText): TranscriptReading;
  /** Whether its model completed a turn, from the transcript (and stderr), for the launcher's infrastructure-failure check. */
  modelActivity?(transcript: TranscriptText, stderr: string): ModelActivity;
}
