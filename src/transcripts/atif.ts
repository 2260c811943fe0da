import type { RunUsage } from './run-usage.js';
import type { Transcript, TranscriptStep } from './types.js';

/**
 * A run's agent transcript as an ATIF trajectory: the Agent Trajectory Interchange Format of Harbor's RFC 0001,
 * version 1.7 (harbor-framework/harbor, rfcs/0001-trajectory-format.md), which Harbor's viewer and NVIDIA's NeMo
 * tools read. One ATIF step per model response (its text, reasoning, tool calls and, as its observation, their
 * results), the prompt as a user step, an error the CLI reported as a system step; per-step metrics where the CLI
 * reports usage per response, and the run's totals as final metrics where known.
 */
export const atifVersion = 'ATIF-v1.7';

interface AtifToolCall {
  tool_call_id: string;
  function_name: string;
  arguments: Record<string, unknown>;
}

interface AtifObservationResult {
  source_call_id?: string;
  content?: string;
  extra?: Record<string, unknown>;
}

interface AtifStep {
  step_id: number;
  timestamp?: string;
  source: 'system' | 'user' | 'agent';
  message: string;
  reasoning_content?: string;
  tool_calls?: AtifToolCall[];
  observation?: { results: AtifObservationResult[] };
  metrics?: { prompt_tokens?: number; completion_tokens?: number; cached_tokens?: number; cost_usd?: number };
}

export interface AtifTrajectory {
  schema_version: typeof atifVersion;
  session_id: string;
  agent: { name: string; version: string; model_name?: string };
  steps: AtifStep[];
  notes?: string;
  final_metrics?: {
    total_prompt_tokens?: number;
    total_completion_tokens?: number;
    total_cached_tokens?: number;
    total_cost_usd?: number;
    total_steps: number;
    extra?: Record<string, unknown>;
  };
}

export interface AtifRun {
  runId: string;
  agentVersion: string | null;
  /** The task prompt the agent was given, when its transcript does not repeat it. */
  prompt?: string;
  usage: RunUsage;
}

/** ATIF's tool arguments are an object: another value is kept under `value`. */
const argumentsObject = (value: unknown): Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : value === undefined
      ? {}
      : { value };

const known = (value: number | 'unknown') => (value === 'unknown' ? undefined : value);

/** `transcript` as an ATIF trajectory (`runs export` writes it as trajectory.json); undefined when there is nothing to write (no step at all). */
export function toAtif(transcript: Transcript, run: AtifRun): AtifTrajectory | undefined {
  const steps: AtifStep[] = [];
  const stepOfCall = new Map<string, AtifStep>();
  // A response's texts are joined once at the end: joining as they come copies the response anew each time.
  const texts = new Map<AtifStep, ResponseTexts>();
  let response: AtifStep | undefined;
  const push = (step: Omit<AtifStep, 'step_id'>) => {
    const numbered = { step_id: steps.length + 1, ...step };
    steps.push(numbered);
    return numbered;
  };
  if (run.prompt !== undefined && transcript.steps[0]?.source !== 'user') push({ source: 'user', message: run.prompt });
  for (const step of transcript.steps) {
    const timestamp = step.at ? { timestamp: step.at } : {};
    if (step.source === 'user' || (step.kind === 'message' && step.isError)) {
      push({ ...timestamp, source: step.source === 'user' ? 'user' : 'system', message: step.text ?? '' });
      response = undefined;
    } else if (step.kind === 'tool_result') {
      const owner = (step.callId !== undefined ? stepOfCall.get(step.callId) : undefined) ?? response;
      const result: AtifObservationResult = {
        ...(owner?.tool_calls?.some((call) => call.tool_call_id === step.callId) ? { source_call_id: step.callId } : {}),
        ...(step.text !== undefined ? { content: step.text } : {}),
        ...(step.isError ? { extra: { is_error: true } } : {}),
      };
      if (owner) (owner.observation ??= { results: [] }).results.push(result);
      else push({ ...timestamp, source: 'system', message: '', observation: { results: [result] } });
      // The model answers after its calls' results: its next step is a new response.
      response = undefined;
    } else {
      response ??= push({ ...timestamp, source: 'agent', message: '', ...metricsOf(step) });
      addToResponse(response, step, stepOfCall, texts);
    }
  }
  if (steps.length === 0) return undefined;
  for (const [owner, { message, reasoning }] of texts) {
    owner.message = message.join('\n\n');
    if (reasoning.length) owner.reasoning_content = reasoning.join('\n\n');
  }
  const { usage } = run;
  const totals = {
    ...(known(usage.input_tokens) !== undefined ? { total_prompt_tokens: known(usage.input_tokens) } : {}),
    ...(known(usage.output_tokens) !== undefined ? { total_completion_tokens: known(usage.output_tokens) } : {}),
    ...(known(usage.cached_input_tokens) !== undefined ? { total_cached_tokens: known(usage.cached_input_tokens) } : {}),
    ...(known(usage.cost_usd) !== undefined ? { total_cost_usd: known(usage.cost_usd) } : {}),
  };
  return {
    schema_version: atifVersion,
    session_id: run.runId,
    agent: { name: transcript.agent, version: run.agentVersion ?? 'unknown', ...(usage.model ? { model_name: usage.model } : {}) },
    steps,
    notes:
      `Exported by a2rl-bench from the agent's own transcript. One agent step per model response; ` +
      `final_metrics.extra says where the dollars came from. Tokens: prompt includes cached; completion includes reasoning.`,
    final_metrics: {
      ...totals,
      total_steps: steps.length,
      extra: {
        turns: usage.turns,
        tool_calls: usage.tool_calls,
        reasoning_tokens: usage.reasoning_tokens,
        cost_source: usage.cost_source,
        price_table: usage.price_table,
      },
    },
  };
}

function metricsOf(step: TranscriptStep): Pick<AtifStep, 'metrics'> {
  if (!step.usage) return {};
  const { inputTokens, outputTokens, cachedInputTokens, costUsd } = step.usage;
  const metrics = {
    ...(inputTokens !== undefined ? { prompt_tokens: inputTokens } : {}),
    ...(outputTokens !== undefined ? { completion_tokens: outputTokens } : {}),
    ...(cachedInputTokens !== undefined ? { cached_tokens: cachedInputTokens } : {}),
    ...(costUsd !== undefined ? { cost_usd: costUsd } : {}),
  };
  return Object.keys(metrics).length ? { metrics } : {};
}

interface ResponseTexts {
  message: string[];
  reasoning: string[];
}

function addToResponse(
  response: AtifStep,
  step: TranscriptStep,
  stepOfCall: Map<string, AtifStep>,
  texts: Map<AtifStep, ResponseTexts>,
): void {
  if (step.kind === 'message' || step.kind === 'reasoning') {
    if (!step.text) return;
    let own = texts.get(response);
    if (!own) texts.set(response, (own = { message: [], reasoning: [] }));
    own[step.kind === 'message' ? 'message' : 'reasoning'].push(step.text);
  } else if (step.kind === 'tool_call') {
    const id = step.callId ?? `call-${response.step_id}-${(response.tool_calls?.length ?? 0) + 1}`;
    (response.tool_calls ??= []).push({
      tool_call_id: id,
      function_name: step.tool ?? 'unknown',
      arguments: argumentsObject(step.arguments),
    });
    stepOfCall.set(id, response);
  }
}
