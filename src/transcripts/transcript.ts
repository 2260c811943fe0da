import type { TranscriptText } from './json-lines.js';
import { transcriptReaders } from './readers/index.js';
import type { Transcript, TranscriptReading, TranscriptStep } from './types.js';

/** The common shape, declared in types.ts so that the readers need not import this file (which imports them). */
export type { TokenUsage, Transcript, TranscriptReader, TranscriptReading, TranscriptStep } from './types.js';

/** A name of the agent's tool without the MCP server's prefix each CLI adds: `mcp__a2rl__exec`, `mcp_a2rl_exec` → `exec`. */
export const bareToolName = (tool: string) => tool.replace(/^mcp__?a2rl__?/, '');

/**
 * An agent's saved transcript (`agent/transcript.jsonl` of its run) in the common shape. `agent` is the run's agent
 * (`claude-code`, `codex`, `gemini-cli`, `replay`, `command`); an agent without a reader gives no steps and "unknown" usage.
 */
export function readTranscript(agent: string, text: TranscriptText): Transcript {
  const reader = Object.hasOwn(transcriptReaders, agent) ? transcriptReaders[agent] : undefined;
  const reading: TranscriptReading = reader ? reader.read(text) : { steps: [], usage: 'unknown' };
  return {
    agent,
    ...reading,
    turns: reading.turns ?? countTurns(reading.steps),
    toolCalls: reading.toolCalls ?? reading.steps.filter((step) => step.kind === 'tool_call').length,
  };
}

/**
 * How many model responses the steps show. Not every CLI marks where a response ends (Codex's JSON does not), but a
 * model answers only after its tool calls' results came back: each run of the agent's own steps that follows a tool
 * result or the prompt is one response.
 */
export function countTurns(steps: readonly TranscriptStep[]): number {
  let turns = 0;
  let inResponse = false;
  for (const step of steps) {
    // An error the CLI reported (a model call that failed, a warning) is no response, and ends none.
    if (step.kind === 'message' && step.isError) continue;
    const fromModel = step.kind !== 'tool_result' && step.source !== 'user';
    if (fromModel && !inResponse) turns++;
    inResponse = fromModel;
  }
  return turns;
}
