import { setTimeout as sleep } from 'node:timers/promises';
import pLimit from 'p-limit';
import { z } from 'zod';
import { A2rlError } from '../../util/errors.js';
import { sha256 } from '../../util/hashing.js';
import type { Store } from '../../store/store.js';
import type { Judge, PairwiseQuery, Preference } from './judge.js';

export interface LlmJudgeOptions {
  /** Base URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1. */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Requests in flight at once. */
  concurrency?: number;
  /** Tries per request on network errors, 408, 429 and 5xx; the wait doubles each time. */
  maxAttempts?: number;
  firstBackoffMs?: number;
  requestTimeoutMs?: number;
}

const responseSchema = z.object({
  choices: z.array(z.object({ message: z.object({ content: z.string().nullable() }) })).min(1),
});

const systemPrompt =
  'You compare two responses to the same instruction and decide which follows it better: every stated constraint ' +
  '(format, length, required or forbidden words, tone) first, then helpfulness and fluency. Length alone is no merit. ' +
  'Answer with exactly one word: A, B or TIE.';

/** The user message for one comparison; also part of the cache key. */
export function judgePrompt(query: PairwiseQuery): string {
  return `Instruction:\n${query.instruction}\n\nResponse A:\n${query.output_a}\n\nResponse B:\n${query.output_b}\n\nWhich response follows the instruction better? Answer A, B or TIE.`;
}

export function parsePreference(content: string): Preference | undefined {
  const word = /^\W*(a|b|tie)\b/i.exec(content.trim())?.[1]?.toLowerCase();
  return word === 'a' || word === 'b' || word === 'tie' ? word : undefined;
}

class RetryableError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/**
 * An LLM judge behind any OpenAI-compatible chat completions endpoint. Verdicts are cached
 * in the store by (judge, prompt, output A, output B): grading the same outputs again costs
 * nothing. A request that still fails after its retries fails the whole grading, and the
 * grading's other requests are dropped, so they do not hold the shared concurrency slots.
 */
export class LlmJudge implements Judge {
  readonly id: string;
  readonly kind = 'llm';
  private readonly limit: ReturnType<typeof pLimit>;

  constructor(
    private readonly store: Store,
    private readonly options: LlmJudgeOptions,
  ) {
    this.id = `llm:${options.model}@${new URL(options.baseUrl).host}`;
    this.limit = pLimit(options.concurrency ?? 4);
  }

  async prefer(_task: unknown, queries: PairwiseQuery[]): Promise<Preference[]> {
    const givenUp = new AbortController();
    try {
      return await Promise.all(queries.map((query) => this.limit(() => this.preferOne(query, givenUp.signal))));
    } catch (error) {
      givenUp.abort(error);
      throw error;
    }
  }

  private async preferOne(query: PairwiseQuery, givenUp: AbortSignal): Promise<Preference> {
    givenUp.throwIfAborted();
    const prompt = judgePrompt(query);
    const key = sha256(JSON.stringify([this.id, systemPrompt, prompt]));
    const cached = this.store.getJudgement(key);
    if (cached) return cached;
    const preference = await this.requestWithRetries(prompt, givenUp);
    this.store.putJudgement(key, this.id, preference);
    return preference;
  }

  private async requestWithRetries(prompt: string, givenUp: AbortSignal): Promise<Preference> {
    const attempts = this.options.maxAttempts ?? 4;
    let wait = this.options.firstBackoffMs ?? 1000;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.request(prompt, givenUp);
      } catch (error) {
        givenUp.throwIfAborted();
        if (!(error instanceof RetryableError) || attempt >= attempts) {
          throw new A2rlError(
            'GRADING_FAILED',
            `the judge ${this.id} failed: ${(error as Error).message}${attempt > 1 ? ` (after ${attempt} attempts)` : ''}`,
            {
              cause: error,
            },
          );
        }
        await sleep(error.retryAfterMs ?? wait * (0.75 + Math.random() / 2), undefined, { signal: givenUp });
        wait *= 2;
      }
    }
  }

  private async request(prompt: string, givenUp: AbortSignal): Promise<Preference> {
    let response: Response;
    try {
      response = await fetch(`${this.options.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}) },
        body: JSON.stringify({
          model: this.options.model,
          temperature: 0,
          max_tokens: 4,
          messages: [
            { role: 'system', content: systemPrompt },
            { role: 'user', content: prompt },
          ],
        }),
        signal: AbortSignal.any([givenUp, AbortSignal.timeout(this.options.requestTimeoutMs ?? 60_000)]),
      });
    } catch (error) {
      throw new RetryableError(`request failed: ${(error as Error).message}`);
    }
    if (response.status === 408 || response.status === 429 || response.status >= 500) {
      const retryAfter = Number(response.headers.get('retry-after'));
      throw new RetryableError(`HTTP ${response.status}`, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined);
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}: ${(await response.text()).slice(0, 200)}`);
    const body = responseSchema.safeParse(await response.json().catch(() => undefined));
    if (!body.success) throw new RetryableError('the response is not a chat completion');
    const preference = parsePreference(body.data.choices[0]!.message.content ?? '');
    if (!preference)
      throw new RetryableError(`the judge answered "${(body.data.choices[0]!.message.content ?? '').slice(0, 40)}", not A, B or TIE`);
    return preference;
  }
}
