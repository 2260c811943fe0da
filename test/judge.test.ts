import fc from 'fast-check';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isA2rlError } from '../src/util/errors.js';
import { judgeAgainstReferences, type PairwiseQuery } from '../src/grading/judge/judge.js';
import { judgePrompt, LlmJudge, parsePreference } from '../src/grading/judge/llm.js';
import { lengthControlledWinRate, winRate } from '../src/grading/judge/win-rate.js';
import { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { startFakeLlm } from './helpers/fake-llm.js';
import { call, startServer, waitScore } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';

const task = getTask('micro-gsm8k');
const queries = (n: number): PairwiseQuery[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `q${i}`,
    instruction: `Say ${i}.`,
    constraints: [],
    output_a: `answer a${i}`,
    output_b: `answer b${i}`,
  }));

describe('LLM judge over an OpenAI-compatible endpoint', () => {
  let cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.map((close) => close()));
    cleanup = [];
  });

  async function setup(reply: Parameters<typeof startFakeLlm>[0], options: { concurrency?: number; maxAttempts?: number } = {}) {
    const llm = await startFakeLlm(reply);
    cleanup.push(llm.close);
    const store = new Store(join(tempDir('judge'), 'store.sqlite'));
    cleanup.push(async () => store.close());
    const judge = new LlmJudge(store, { baseUrl: llm.baseUrl, model: 'judge-model-1', apiKey: 'sk-test', firstBackoffMs: 10, ...options });
    return { llm, store, judge };
  }

  it('sends chat completions with the model, key, a system and a user message at temperature 0', async () => {
    const { llm, judge } = await setup(() => 'B');
    expect(await judge.prefer(task, queries(1))).toEqual(['b']);
    const [request] = llm.requests;
    expect(request!.headers.authorization).toBe('Bearer sk-test');
    expect(request!.body.model).toBe('judge-model-1');
    expect(request!.body.temperature).toBe(0);
    expect(request!.body.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(request!.body.messages[1]!.content).toBe(judgePrompt(queries(1)[0]!));
    expect(request!.body.messages[1]!.content).toContain('Response A:\nanswer a0');
    expect(judge.id).toBe(`llm:judge-model-1@${new URL(llm.baseUrl).host}`);
  });

  it('cancels position bias by judging both orders', async () => {
    // A judge that always prefers the first position favours nobody once orders are swapped.
    const { judge } = await setup(() => 'A');
    const items = [{ id: 'i', instruction: 'x', constraints: [], candidate: 'c', reference: 'r' }];
    expect(await judgeAgainstReferences(judge, task, items)).toEqual([0.5]);
  });

  it('retries 429 and 5xx answers with backoff, then succeeds', async () => {
    const { llm, judge } = await setup((_, index) =>
      index === 0 ? { status: 500 } : index === 1 ? { status: 429, headers: { 'retry-after': '0' } } : 'TIE',
    );
    expect(await judge.prefer(task, queries(1))).toEqual(['tie']);
    expect(llm.requests).toHaveLength(3);
  });

  it('caches verdicts, so judging the same outputs again sends nothing', async () => {
    const { llm, judge } = await setup((request) => (request.body.messages[1]!.content.includes('a1') ? 'A' : 'B'));
    const first = await judge.prefer(task, queries(3));
    const sent = llm.requests.length;
    expect(await judge.prefer(task, queries(3))).toEqual(first);
    expect(llm.requests.length).toBe(sent);
    expect(first).toEqual(['b', 'a', 'b']);
  });

  it('keeps at most its concurrency of requests in flight', async () => {
    const { llm, judge } = await setup(() => 'A', { concurrency: 2 });
    await judge.prefer(task, queries(12));
    expect(llm.requests).toHaveLength(12);
    expect(llm.maxInFlight()).toBe(2);
  });

  it.each([
    ['a server that keeps failing', { status: 503 }, /judge llm:judge-model-1@.* failed: HTTP 503 \(after 3 attempts\)/],
    ['an answer that is not A, B or TIE', 'Both are fine.', /answered "Both are fine\.", not A, B or TIE \(after 3 attempts\)/],
    ['a refused request', { status: 401 }, /HTTP 401/],
  ])('fails with the reason after its retries: %s', async (_, answer, message) => {
    const { judge } = await setup(() => answer as never, { maxAttempts: 3 });
    const error = await judge.prefer(task, queries(1)).catch((e: unknown) => e);
    expect(isA2rlError(error, 'GRADING_FAILED')).toBe(true);
    expect((error as Error).message).toMatch(message);
  });

  it('gives up the rest of a grading once one comparison has failed, freeing its slots for the next', async () => {
    const { llm, judge } = await setup(() => ({ status: 503 }), { concurrency: 2, maxAttempts: 2 });
    await expect(judge.prefer(task, queries(100))).rejects.toThrow(/HTTP 503/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Two slots, two attempts each: a few requests, not 2 x 200.
    expect(llm.requests.length).toBeLessThanOrEqual(6);
    const sent = llm.requests.length;
    await expect(judge.prefer(task, queries(1))).rejects.toThrow(/HTTP 503 \(after 2 attempts\)/);
    expect(llm.requests.length).toBe(sent + 2);
  });

  it('reads verdicts leniently but never guesses', () => {
    expect(parsePreference(' a')).toBe('a');
    expect(parsePreference('B.')).toBe('b');
    expect(parsePreference('**TIE**')).toBe('tie');
    expect(parsePreference('Answer: A')).toBeUndefined();
    expect(parsePreference('')).toBeUndefined();
  });
});

describe('win rates', () => {
  it('counts ties half', () => {
    expect(winRate([1, 0, 0.5, 0.5])).toBe(50);
    expect(winRate([])).toBe(0);
  });

  it('does not reward winning by length alone', () => {
    // The candidate is always longer, and wins exactly when it is much longer.
    const reference = Array.from({ length: 200 }, () => 100);
    const candidate = reference.map((length, i) => length + (i % 100));
    const outcomes = candidate.map((length, i) => (length - reference[i]! > 40 ? 1 : 0));
    const raw = winRate(outcomes);
    const lc = lengthControlledWinRate(outcomes, candidate, reference);
    expect(raw).toBeCloseTo(59, 0);
    expect(lc).toBeLessThan(raw - 30);
  });

  it('matches the raw win rate when lengths do not differ, and stays within 0-100', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(0, 0.25, 0.5, 0.75, 1), { minLength: 1, maxLength: 60 }),
        fc.array(fc.nat(300), { minLength: 60, maxLength: 60 }),
        (outcomes, lengths) => {
          const same = lengthControlledWinRate(outcomes, lengths.slice(0, outcomes.length), lengths.slice(0, outcomes.length));
          expect(Math.abs(same - winRate(outcomes))).toBeLessThan(1);
          const mixed = lengthControlledWinRate(outcomes, lengths.slice(0, outcomes.length), lengths.slice(0, outcomes.length).reverse());
          expect(mixed).toBeGreaterThanOrEqual(0);
          expect(mixed).toBeLessThanOrEqual(100);
        },
      ),
    );
  });
});

describe('an LLM judge configured on the server', () => {
  const tweak = `python3 -c "
import torch
from microlm import checkpoint
m = checkpoint.load('models/base')
with torch.no_grad():
    for p in m.parameters(): p.mul_(1.01)
checkpoint.save(m, 'output/tweak')
"`;

  it(
    'grades through the endpoint, names the judge in the score, and never asks twice for the same outputs',
    { timeout: 300_000 },
    async () => {
      const llm = await startFakeLlm((request) => (request.body.messages[1]!.content.length % 3 === 0 ? 'A' : 'TIE'));
      const home = tempDir('llm-home');
      const serverArgs = ['--judge', 'llm', '--judge-url', llm.baseUrl, '--judge-model', 'fake-judge'];
      try {
        for (const round of [1, 2]) {
          const client = await startServer({ home, task: 'micro-alpacaeval', serverArgs });
          try {
            const before = llm.requests.length;
            expect((await call(client, 'exec', { command: tweak })).structured.exit_code).toBe(0);
            const submitted = await call(client, 'submit_artifact', { path: 'output/tweak' });
            const scored = await waitScore(client, submitted.structured.submission_id);
            expect(scored.submissions[0]).toMatchObject({
              state: 'graded',
              metrics: { judge: `llm:fake-judge@${new URL(llm.baseUrl).host}` },
            });
            expect(scored.submissions[0].metrics.lc_win_rate).toEqual(expect.any(Number));
            if (round === 1) expect(llm.requests.length).toBeGreaterThan(before);
            else expect(llm.requests.length).toBe(before);
          } finally {
            await client.close();
          }
        }
      } finally {
        await llm.close();
      }
    },
  );

  it('marks the submission failed with the reason when the judge keeps failing', { timeout: 300_000 }, async () => {
    const llm = await startFakeLlm(() => ({ status: 503 }));
    const client = await startServer({
      home: tempDir('llm-home'),
      task: 'micro-alpacaeval',
      serverArgs: ['--judge', 'llm', '--judge-url', llm.baseUrl, '--judge-model', 'down-judge'],
    });
    try {
      expect((await call(client, 'exec', { command: tweak })).structured.exit_code).toBe(0);
      const submitted = await call(client, 'submit_artifact', { path: 'output/tweak' });
      const scored = await waitScore(client, submitted.structured.submission_id);
      expect(scored.submissions[0].state).toBe('failed');
      expect(scored.submissions[0]).not.toHaveProperty('score');
      expect(scored.submissions[0].error).toMatch(/judge llm:down-judge@.* failed: HTTP 503/);
    } finally {
      await client.close();
      await llm.close();
    }
  });
});
