import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import { alpacaEvalLengthControlledWinRate, type GamedBaselineRow } from '../src/grading/judge/alpaca-eval-lc.js';
import { LlmJudge } from '../src/grading/judge/llm.js';
import { requireJudgeFor } from '../src/grading/judge/registry.js';
import { gamedBaselinesFile, judgeKind } from '../src/grading/kinds/judge.js';
import { lengthControlledWinRate, winRate } from '../src/grading/judge/win-rate.js';
import { Store } from '../src/store/store.js';
import { getTask, getTaskFile, type Task } from '../src/tasks/task.js';
import { isA2rlError } from '../src/util/errors.js';
import { type ChatRequest, startFakeLlm } from './helpers/fake-llm.js';
import { liveOwner, tempDir } from './helpers/sandbox.js';

/** Inputs and outputs of alpaca_eval 0.6.6 (test/alpaca-eval-lc.test.ts); its gamed rows stand in for df_gamed.csv here. */
const golden = JSON.parse(readFileSync(new URL('./fixtures/alpaca-eval-lc-golden.json', import.meta.url), 'utf8')) as {
  cases: Array<{
    name: string;
    records: Array<{ preference: number; modelOutputLength: number; baselineOutputLength: number; instructionDifficulty: number }>;
    gamedBaselineRows?: GamedBaselineRow[];
    expected: { lengthControlledWinRate: number };
  }>;
};
const goldenV1 = golden.cases.find((c) => c.name === 'v1-120-records')!;
const gamedRows = goldenV1.gamedBaselineRows!;
const backend = new BubblewrapBackend(liveOwner);
const marker = '[better]';

/**
 * Item i of a split: the judge prefers whichever output holds the marker, in either position, so outcome i is a win
 * (i % 3 == 0), a loss (1) or a tie (2). Lengths vary, and some responses hold astral characters, whose UTF-16 length
 * differs from the code points alpaca_eval counts.
 */
function item(split: 'public' | 'private', i: number) {
  const response = `${i % 3 === 0 ? marker : ''}${'word '.repeat((i * 7) % 40)}${i % 4 === 0 ? '🙂'.repeat(i) : ''}`;
  const reference = `${i % 3 === 1 ? marker : ''}${'text '.repeat(10 + ((i * 5) % 25))}`;
  return {
    id: `${split}-${i}`,
    split,
    instruction: `Instruction ${split} ${i}.`,
    constraints: null,
    reference,
    response,
    instruction_difficulty: ((i * 13) % 17) / 8 - 1,
  };
}

/** The two outputs of an AlpacaEval annotator's prompt, in the order shown: model "m" first, "M" second. */
function shownOutputs(request: ChatRequest): [string, string] {
  const outputs = [...request.body.messages[1]!.content.matchAll(/"output": """([\s\S]*?)"""\n/g)].map((m) => m[1]!);
  return [outputs[0]!, outputs[1]!];
}

/** A weighted annotator's answer: P(m) = p, as the top log-probabilities of "m" and "M" (a token of probability 0 left out). */
const logprobAnswer = (p: number) => ({
  choice: {
    message: { role: 'assistant', content: p >= 0.5 ? 'm' : 'M' },
    logprobs: {
      content: [
        {
          top_logprobs: [
            ...(p > 0 ? [{ token: 'm', logprob: Math.log(p) }] : []),
            ...(p < 1 ? [{ token: 'M', logprob: Math.log(1 - p) }] : []),
          ],
        },
      ],
    },
  },
});

/** The micro tier's pairwise verdict: whichever response holds the marker, in either position. */
const pairwiseByMarker = (request: ChatRequest) => {
  const prompt = request.body.messages[1]!.content;
  const [a, b] = [prompt.split('Response B:')[0]!.split('Response A:')[1]!, prompt.split('Response B:')[1]!];
  return a.includes(marker) ? 'A' : b.includes(marker) ? 'B' : 'TIE';
};

/** Prefers, with probability 0.9, whichever output holds the marker; 0.5 each when neither does. */
const judgeByMarker = (request: ChatRequest) => {
  const [m, other] = shownOutputs(request);
  return logprobAnswer(m.includes(marker) ? 0.9 : other.includes(marker) ? 0.1 : 0.5);
};

describe('the judge kind on a full-tier task: AlpacaEval 2.0’s length-controlled win rate', () => {
  let cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.map((close) => close()));
    cleanup = [];
  });

  /** Grades items through the kind with an LLM judge (AlpacaEval 2.0's weighted annotator) behind a real local HTTP server. */
  async function grade(task: Task, items: object[], answer: Parameters<typeof startFakeLlm>[0] = judgeByMarker) {
    const llm = await startFakeLlm(answer);
    cleanup.push(llm.close);
    const dir = tempDir('judge-full');
    const store = new Store(join(dir, 'store.sqlite'));
    cleanup.push(async () => store.close());
    const judge = new LlmJudge(store, {
      baseUrl: llm.baseUrl,
      model: 'judge-1',
      concurrency: 8,
      annotator: 'weighted_alpaca_eval_gpt4_turbo',
    });
    const outFile = join(dir, judgeKind.outputFile);
    writeFileSync(outFile, items.map((line) => JSON.stringify(line) + '\n').join(''));
    return judgeKind.score({ task, outFile, outDir: dir, backend, judge });
  }

  /** alpacaeval as a served run will see it: its declaration with the prepared eval folder (assets/alpacaeval/eval). */
  function alpacaeval(gamed: GamedBaselineRow[] | null = gamedRows): Task {
    const evalData = tempDir('alpacaeval-eval');
    if (gamed) {
      const lines = gamed.map((g) =>
        JSON.stringify({
          preference: g.preference,
          std_delta_len: g.standardisedLengthDelta,
          instruction_difficulty: g.instructionDifficulty,
        }),
      );
      writeFileSync(join(evalData, gamedBaselinesFile), lines.join('\n') + '\n');
    }
    // Task covers the micro tier only until full-tier runs are served; the kind reads tier, id and paths.evalData.
    return { ...getTaskFile('alpacaeval'), paths: { evalData } } as unknown as Task;
  }

  it('scores each half by length_controlled_v1 with the instruction difficulty and the gamed baselines', { timeout: 60_000 }, async () => {
    const items = [...Array.from({ length: 40 }, (_, i) => item('public', i)), ...Array.from({ length: 37 }, (_, i) => item('private', i))];
    const metrics = await grade(alpacaeval(), items);
    const round = (x: number) => Math.round(x * 100) / 100;
    // What alpaca_eval is given: 1.9 the model's response holds the marker, 1.1 the reference does, 1.5 neither; code points.
    const records = (chosen: typeof items) =>
      chosen.map((it) => ({
        preference: it.response.includes(marker) ? 1.9 : it.reference.includes(marker) ? 1.1 : 1.5,
        modelOutputLength: Array.from(it.response).length,
        baselineOutputLength: Array.from(it.reference).length,
        instructionDifficulty: it.instruction_difficulty,
      }));
    const fit = (chosen: typeof items) =>
      alpacaEvalLengthControlledWinRate(records(chosen), { glm: 'length_controlled_v1', gamedBaselineRows: gamedRows });
    for (const split of ['public', 'private'] as const) {
      const mine = items.filter((it) => it.split === split);
      const expected = fit(mine);
      expect(expected.lengthControlledWinRate).toBeGreaterThan(0);
      expect(expected.lengthControlledWinRate).toBeLessThan(100);
      expect(metrics[split]).toMatchObject({
        score: round(expected.lengthControlledWinRate),
        lc_win_rate: round(expected.lengthControlledWinRate),
        lc_standard_error: round(expected.lengthControlledStandardError),
        win_rate: round(expected.winRate),
        comparisons: mine.length,
        unannotated: 0,
        mean_length: round(mine.reduce((sum, it) => sum + it.response.length, 0) / mine.length),
        judge: expect.stringMatching(/^llm:judge-1@127\.0\.0\.1:\d+\/weighted_alpaca_eval_gpt4_turbo$/),
      });
    }
    // The whole set's figure is one fit over every instruction, not a mix of the halves', and only the private half has it.
    const whole = fit(items);
    expect(metrics.private).toMatchObject({ whole_score: round(whole.lengthControlledWinRate), whole_comparisons: items.length });
    expect(metrics.public).not.toHaveProperty('whole_score');
  });

  it(
    'fits the whole set once, as alpaca_eval does over all of it: its own figure on recorded annotations',
    { timeout: 60_000 },
    async () => {
      // alpaca_eval 0.6.6's length-controlled win rate of 120 recorded annotations (test/fixtures/alpaca-eval-lc-golden.json),
      // annotated again here through the judge: each instruction's preference as the weighted annotator's probabilities.
      const items = goldenV1.records.map((record, i) => ({
        id: `item-${i}`,
        split: i % 2 ? 'private' : 'public',
        instruction: `Instruction ${i}.`,
        constraints: null,
        reference: 'b'.repeat(record.baselineOutputLength),
        response: 'r'.repeat(record.modelOutputLength),
        instruction_difficulty: record.instructionDifficulty,
      }));
      const metrics = await grade(alpacaeval(), items, (request) => {
        const i = Number(/Instruction (\d+)\./.exec(request.body.messages[1]!.content)![1]);
        const preference = goldenV1.records[i]!.preference;
        const modelWins = (preference === 0 ? 1.5 : preference) - 1; // alpaca_eval reads 0 as a tie
        const modelShownFirst = shownOutputs(request)[0].startsWith('r');
        return logprobAnswer(modelShownFirst ? modelWins : 1 - modelWins);
      });
      const round = (x: number) => Math.round(x * 100) / 100;
      expect(metrics.private.whole_score).toBe(round(goldenV1.expected.lengthControlledWinRate));
      expect(metrics.private.whole_comparisons).toBe(120);
      expect(metrics.public.score).not.toBe(metrics.private.whole_score);
    },
  );

  it('leaves instructions the judge’s answer gives no preference for out, as alpaca_eval does', { timeout: 60_000 }, async () => {
    const items = Array.from({ length: 30 }, (_, i) => item(i % 2 ? 'private' : 'public', i));
    const unparsable = items.filter((_, i) => i % 5 === 0).map((it) => it.instruction);
    const metrics = await grade(alpacaeval(), items, (request) =>
      unparsable.some((text) => request.body.messages[1]!.content.includes(`"""${text}"""`)) ? 'I prefer neither.' : judgeByMarker(request),
    );
    expect(Number(metrics.public.unannotated) + Number(metrics.private.unannotated)).toBe(unparsable.length);
    expect(metrics.private.whole_comparisons).toBe(items.length - unparsable.length);
  });

  it(
    'fails the grading, naming the fix, when an item lacks its difficulty or the gamed baselines are missing',
    { timeout: 60_000 },
    async () => {
      const items = Array.from({ length: 12 }, (_, i) => item(i < 6 ? 'public' : 'private', i));
      const { instruction_difficulty: _, ...withoutDifficulty } = items[3]!;
      const missingDifficulty = await grade(alpacaeval(), [...items.slice(0, 3), withoutDifficulty, ...items.slice(4)]).catch(
        (e: unknown) => e,
      );
      expect(isA2rlError(missingDifficulty, 'GRADING_FAILED')).toBe(true);
      expect((missingDifficulty as Error).message).toBe(
        'item public-3 has no instruction_difficulty, which the length-controlled win rate needs: prepare the assets again (a2rl prepare alpacaeval)',
      );
      const damaged = alpacaeval(null);
      writeFileSync(join(damaged.paths.evalData, gamedBaselinesFile), '{"preference": "high"}\n');
      const damagedGamed = await grade(damaged, items).catch((e: unknown) => e);
      expect(isA2rlError(damagedGamed, 'GRADING_FAILED')).toBe(true);
      expect((damagedGamed as Error).message).toMatch(
        /gamed_baselines\.jsonl line 1 is not a gamed baseline row \{"preference", "std_delta_len", "instruction_difficulty"\} of numbers: prepare the assets again \(a2rl prepare alpacaeval\)$/,
      );
      const noGamed = await grade(alpacaeval(null), items).catch((e: unknown) => e);
      expect(isA2rlError(noGamed, 'GRADING_FAILED')).toBe(true);
      expect((noGamed as Error).message).toMatch(
        /gamed_baselines\.jsonl is missing: the length-controlled win rate needs it; prepare the assets again \(a2rl prepare alpacaeval\)/,
      );
    },
  );

  it('keeps the micro tier’s figures: the win rate as the score, the simple length control beside it', { timeout: 60_000 }, async () => {
    const items = Array.from({ length: 20 }, (_, i) => item(i % 2 ? 'private' : 'public', i));
    const metrics = await grade(getTask('micro-alpacaeval'), items, pairwiseByMarker);
    const mine = items.filter((it) => it.split === 'public');
    const outcomes = mine.map((it) => (it.response.includes(marker) ? 1 : it.reference.includes(marker) ? 0 : 0.5));
    const round = (x: number) => Math.round(x * 100) / 100;
    expect(metrics.public).toEqual({
      score: round(winRate(outcomes)),
      win_rate: round(winRate(outcomes)),
      lc_win_rate: round(
        lengthControlledWinRate(
          outcomes,
          mine.map((it) => it.response.length),
          mine.map((it) => it.reference.length),
        ),
      ),
      comparisons: mine.length,
      mean_length: round(mine.reduce((sum, it) => sum + it.response.length, 0) / mine.length),
      judge: expect.any(String),
    });
  });
});

describe('requireJudgeFor: a full-tier judged task never falls back to the rubric', () => {
  const llm = { kind: 'llm', baseUrl: 'http://127.0.0.1:8000/v1', model: 'judge' } as const;

  it('refuses alpacaeval with the rubric judge, saying how to start it', () => {
    let error: unknown;
    try {
      requireJudgeFor(getTaskFile('alpacaeval'), { kind: 'rubric' });
    } catch (e) {
      error = e;
    }
    expect(isA2rlError(error, 'INVALID_INPUT')).toBe(true);
    expect((error as Error).message).toBe(
      'alpacaeval grades with an LLM judge: start it with --judge llm --judge-url URL --judge-model NAME (the rubric judge is for micro tasks)',
    );
  });

  it('accepts an LLM judge for alpacaeval, either judge for a micro task, and any for a task no judge grades', () => {
    expect(() => requireJudgeFor(getTaskFile('alpacaeval'), llm)).not.toThrow();
    for (const judge of [{ kind: 'rubric' } as const, llm]) {
      expect(() => requireJudgeFor(getTaskFile('micro-alpacaeval'), judge)).not.toThrow();
      expect(() => requireJudgeFor(getTaskFile('gsm8k'), judge)).not.toThrow();
    }
  });
});
