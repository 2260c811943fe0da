import { setTimeout as sleep } from 'node:timers/promises';
import pLimit from 'p-limit';
import { z } from 'zod';
import { A2rlError } from '../../util/errors.js';
import { sha256 } from '../../util/hashing.js';
import type { Store } from '../../store/store.js';
import {
  alpacaEvalAnnotatorNames,
  alpacaEvalAnnotators,
  type AlpacaEvalAnnotatorName,
  annotationRequest,
  type ChatChoice,
} from './alpaca-eval-annotators.js';
import type { AnnotationItem, AnswerJudgeItem, Judge, PairwiseQuery, Preference } from './judge.js';

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
  /**
   * How the full tier's AlpacaEval instructions are annotated (alpaca-eval-annotators.ts): the reference harness's
   * `alpaca_eval_gpt5_2_fn` (the default) or AlpacaEval 2.0's `weighted_alpaca_eval_gpt4_turbo`. Micro tasks are
   * judged with the pairwise prompt below whatever this says.
   */
  annotator?: AlpacaEvalAnnotatorName;
}

/** The full tier's annotator when none is named: the reference harness's. */
export const defaultAnnotator: AlpacaEvalAnnotatorName = 'alpaca_eval_gpt5_2_fn';

const responseSchema = z.object({
  choices: z.array(z.object({ message: z.object({ content: z.string().nullable().optional() }).passthrough() }).passthrough()).min(1),
});

const systemPrompt =
  'You compare two responses to the same instruction and decide which follows it better: every stated constraint ' +
  '(format, length, required or forbidden words, tone) first, then helpfulness and fluency. Length alone is no merit. ' +
  'Answer with exactly one word: A, B or TIE.';

/**
 * DeepSearchQA's reference judge request's settings besides model and messages. The reference (`_judge_answer`) calls
 * RD-Agent's `APIBackend().build_messages_and_create_chat_completion` with no settings of its own, so its LiteLLM
 * backend sends `LLMSettings`' defaults (`rdagent/oai/llm_conf.py`): `chat_temperature` 0.5, `chat_max_tokens` None and
 * `reasoning_effort` None (neither sent). Not matched, by design (docs/tasks.md): it streams (`chat_stream`; the text is
 * the same) and retries 10 times a second apart (`max_retry`; ours: `maxAttempts`, backing off).
 */
export const answerJudgeSettings: Readonly<Record<string, unknown>> = { temperature: 0.5 };

/** DeepSearchQA's reference judge (RD-Agent autorl_bench `deepsearchqa/eval.py`, `_judge_answer`): its system prompt and question. */
export const answerJudgeSystemPrompt = 'You are a strict answer evaluator.';
export function answerJudgePrompt(item: AnswerJudgeItem): string {
  return `You are an answer evaluator. Compare the predicted answer to the gold answer.
        Question answer type: ${item.answerType}
        Gold answer: ${item.gold}
        Predicted answer: ${item.predicted}
        For "Single Answer": The predicted answer is correct if it contains the same key information as the gold answer.
        For "Set Answer": The predicted answer is correct if it contains ALL items from the gold answer (order doesn't matter, minor wording variations are OK).
        Reply with ONLY "correct" or "incorrect". No explanation.`;
}

/**
 * The reference's reading: the answer's first line, stripped of punctuation, is "correct"; any other line is incorrect.
 * An empty answer has no first line, which the reference's reading fails on and so falls back to the string match: null.
 */
export function readAnswerVerdict(content: string): boolean | null {
  if (content.trim() === '') return null;
  const first = content.trim().toLowerCase().split(/\r?\n/)[0]!;
  return first.trim().replace(/^[.!,;: \t\r\n]+|[.!,;: \t\r\n]+$/g, '') === 'correct';
}

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
  readonly annotator: AlpacaEvalAnnotatorName;
  private readonly limit: ReturnType<typeof pLimit>;

  constructor(
    private readonly store: Store,
    private readonly options: LlmJudgeOptions,
  ) {
    this.annotator = options.annotator ?? defaultAnnotator;
    if (!alpacaEvalAnnotatorNames.includes(this.annotator)) {
      throw new A2rlError(
        'INVALID_INPUT',
        `No AlpacaEval annotator "${this.annotator}"; use one of: ${alpacaEvalAnnotatorNames.join(', ')}.`,
      );
    }
    // An annotator other than the default is part of the judge's name, so grades by different protocols never mix.
    const protocol = this.annotator === defaultAnnotator ? '' : `/${this.annotator}`;
    this.id = `llm:${options.model}@${new URL(options.baseUrl).host}${protocol}`;
    this.limit = pLimit(options.concurrency ?? 4);
  }

  async prefer(_task: unknown, queries: PairwiseQuery[]): Promise<Preference[]> {
    return this.all(queries, (query, givenUp) => this.preferOne(query, givenUp));
  }

  /**
   * alpaca_eval's preference for each item (1 the reference is better, 2 the model's; null when the answer cannot be
   * parsed, which alpaca_eval leaves out), by this judge's annotator, one request per item in alpaca_eval's order of
   * the two outputs. Not cached: the store's judgement cache holds pairwise verdicts only.
   */
  async annotate(items: AnnotationItem[]): Promise<Array<number | null>> {
    const annotator = alpacaEvalAnnotators[this.annotator];
    return this.all(items, (item, givenUp) => {
      const { messages, read } = annotationRequest(annotator, item);
      return this.requestWithRetries({ ...annotator.request, messages }, read, givenUp);
    });
  }

  /**
   * DeepSearchQA's binary verdicts, asked as its reference asks them (`answerJudgeSettings`, the first line read). A request
   * that fails after its retries gives null, not a failed grading: the reference falls back to a string match there.
   */
  async judgeAnswers(items: AnswerJudgeItem[]): Promise<Array<boolean | null>> {
    const messages = (item: AnswerJudgeItem) => [
      { role: 'system', content: answerJudgeSystemPrompt },
      { role: 'user', content: answerJudgePrompt(item) },
    ];
    return this.all(items, (item, givenUp) =>
      this.requestWithRetries(
        { ...answerJudgeSettings, messages: messages(item) },
        (choice) => readAnswerVerdict(choice.message?.content ?? ''),
        givenUp,
      ).catch(() => null),
    );
  }

  /**
   * One chat completion of the caller's own question, through this judge's endpoint, model, retries and timeout: the
   * answer's text, unread (the integrity review, src/integrity/review.ts, reads it against its own schema).
   */
  async chat(messages: Array<{ role: 'system' | 'user'; content: string }>): Promise<string> {
    return this.requestWithRetries({ temperature: 0, messages }, (choice) => choice.message?.content ?? '', new AbortController().signal);
  }

  /** Runs one request per input, at most `concurrency` at once; the first that fails drops the others. */
  private async all<I, O>(inputs: I[], one: (input: I, givenUp: AbortSignal) => Promise<O>): Promise<O[]> {
    const givenUp = new AbortController();
    try {
      return await Promise.all(
        inputs.map((input) =>
          this.limit(() => {
            givenUp.signal.throwIfAborted();
            return one(input, givenUp.signal);
          }),
        ),
      );
    } catch (error) {
      givenUp.abort(error);
      throw error;
    }
  }

  private async preferOne(query: PairwiseQuery, givenUp: AbortSignal): Promise<Preference> {
    const prompt = judgePrompt(query);
    const key = sha256(JSON.stringify([this.id, systemPrompt, prompt]));
    const cached = this.store.getJudgement(key);
    if (cached) return cached;
    const messages = [
      { role: 'system', content: systemPrompt },
      { role: 'user', content: prompt },
    ];
    // No token limit: reasoning models refuse max_tokens, and their reasoning counts against max_completion_tokens.
    const preference = await this.requestWithRetries({ temperature: 0, messages }, readPreference, givenUp);
    this.store.putJudgement(key, this.id, preference);
    return preference;
  }

  /** One chat completion, read by `read` (which throws RetryableError for an answer worth asking again), with retries. */
  private async requestWithRetries<T>(body: Record<string, unknown>, read: (choice: ChatChoice) => T, givenUp: AbortSignal): Promise<T> {
    const attempts = this.options.maxAttempts ?? 4;
    let wait = this.options.firstBackoffMs ?? 1000;
    for (let attempt = 1; ; attempt++) {
      try {
        return read(await this.request(body, givenUp));
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

  private async request(body: Record<string, unknown>, givenUp: AbortSignal): Promise<ChatChoice> {
    let response: Response;
    try {
      response = await fetch(`${this.options.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}) },
        body: JSON.stringify({ model: this.options.model, ...body }),
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
    const parsed = responseSchema.safeParse(await response.json().catch(() => undefined));
    if (!parsed.success) throw new RetryableError('the response is not a chat completion');
    return parsed.data.choices[0] as ChatChoice;
  }
}

/** The pairwise verdict in a choice's text; an answer that is not one is asked again. */
function readPreference(choice: ChatChoice): Preference {
  const content = choice.message?.content ?? '';
  const preference = parsePreference(content);
  if (!preference) throw new RetryableError(`the judge answered "${content.slice(0, 40)}", not A, B or TIE`);
  return preference;
}
