import type { RunAnalysis } from './analysis.js';
import { A2rlError } from '../util/errors.js';

export interface NarrativeOptions {
  /** Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1. */
  baseUrl: string;
  model: string;
  apiKey?: string;
  timeoutMs?: number;
}

const systemPrompt =
  'You write a short factual account (at most three paragraphs, plain text) of one run of an AI agent on an RL ' +
  'post-training benchmark, from the JSON facts given: what it tried in each iteration, what worked, why it failed ' +
  'where it did, and how it used its budget. Use only the facts; quote numbers exactly as given; invent nothing.';

/** The facts the narrative is written from: the deterministic summary, without the long series. */
export function narrativeFacts(analysis: RunAnalysis): unknown {
  const { compute_curve: _curve, ...facts } = analysis;
  return facts;
}

/** Asks a language model for a narrative of the run; the summary itself never depends on it. */
export async function writeNarrative(analysis: RunAnalysis, options: NarrativeOptions): Promise<string> {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
      body: JSON.stringify({
        model: options.model,
        temperature: 0,
        messages: [
          { role: 'system', content: systemPrompt },
          { role: 'user', content: JSON.stringify(narrativeFacts(analysis)) },
        ],
      }),
      signal: AbortSignal.timeout(options.timeoutMs ?? 120_000),
    });
  } catch (error) {
    throw new A2rlError(
      'UNAVAILABLE',
      `The narrative model at ${url} could not be reached (${(error as Error).message}); check --llm-url, or drop --llm.`,
      {
        cause: error,
      },
    );
  }
  const body = (await response.json().catch(() => undefined)) as { choices?: Array<{ message?: { content?: string | null } }> } | undefined;
  const text = body?.choices?.[0]?.message?.content?.trim();
  if (!response.ok || !text) {
    throw new A2rlError(
      'UNAVAILABLE',
      `The narrative model at ${url} answered HTTP ${response.status} without a chat completion; check --llm-url and --llm-model, or drop --llm.`,
    );
  }
  return text;
}
