import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isSwitched } from '../src/grading/judge/alpaca-eval-annotators.js';
import { judgeAgainstReferences } from '../src/grading/judge/judge.js';
import { LlmJudge } from '../src/grading/judge/llm.js';
import { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { tasksRoot } from '../src/util/paths.js';
import { fullTierPython } from './helpers/fixture-hub.js';
import { tempDir } from './helpers/sandbox.js';
import { smokeKinds, startSmokeJudge } from './helpers/smoke-judge.js';

// alpacaeval's smoke judge (a test double of the LLM judge) as the server's LlmJudge sees it, both orders.
describe('smoke judge', () => {
  let cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.map((close) => close()));
    cleanup = [];
  });

  async function outcomes(items: Array<{ instruction: string; candidate: string; reference: string }>) {
    const llm = await startSmokeJudge();
    cleanup.push(llm.close);
    const store = new Store(join(tempDir('smoke-judge'), 'store.sqlite'));
    cleanup.push(async () => store.close());
    const judge = new LlmJudge(store, { baseUrl: llm.baseUrl, model: 'smoke', maxAttempts: 1 });
    return judgeAgainstReferences(
      judge,
      getTask('micro-alpacaeval'), // LlmJudge does not read the task
      items.map((item, i) => ({ id: `i${i}`, constraints: null, ...item })),
    );
  }

  it('knows the kinds the smoke fixture writes', () => {
    const script = 'import json, fixture_smoke_alpacaeval as f; print(json.dumps(f.KINDS))';
    const kinds = execFileSync(fullTierPython, ['-c', script], { cwd: join(tasksRoot, 'hflm-tests'), encoding: 'utf8' });
    expect(JSON.parse(kinds)).toEqual(smokeKinds);
  });

  it('prefers the response naming the requested kind only; ties when both or neither do', async () => {
    const instruction = 'Kim is planning a dinner. Name a drink.';
    const refusal = 'I cannot help with that.';
    expect(
      await outcomes([
        { instruction, candidate: 'One drink is tea.', reference: refusal },
        { instruction, candidate: refusal, reference: 'One drink is MILK.' },
        { instruction, candidate: 'One fruit is mango.', reference: refusal },
        { instruction, candidate: 'tea red cat mango teapot', reference: refusal },
        { instruction, candidate: 'Coffee, not juice.', reference: 'One drink is tea.' },
      ]),
    ).toEqual([1, 0, 0.5, 0.5, 0.5]);
  });

  it('answers the full tier’s AlpacaEval ranking prompt with a leaderboard call, in either order of the outputs', async () => {
    const llm = await startSmokeJudge();
    cleanup.push(llm.close);
    const store = new Store(join(tempDir('smoke-judge'), 'store.sqlite'));
    cleanup.push(async () => store.close());
    const judge = new LlmJudge(store, { baseUrl: llm.baseUrl, model: 'smoke', maxAttempts: 1 });
    const refusal = 'I cannot help with that.';
    // Instructions alpaca_eval shows in both orders (the model's output second, then first).
    const items = [
      'Kim is planning a dinner. Name a drink.',
      'Name a drink for the party.',
      'Name a colour.',
      'Name a colour for the wall.',
    ];
    const preferences = await judge.annotate([
      { instruction: items[0]!, response: 'One drink is tea.', reference: refusal },
      { instruction: items[1]!, response: 'One drink is tea.', reference: refusal },
      { instruction: items[2]!, response: refusal, reference: 'Red.' },
      { instruction: items[3]!, response: refusal, reference: 'Red.' },
    ]);
    expect(preferences).toEqual([2, 2, 1, 1]);
    expect(new Set(items.map(isSwitched))).toEqual(new Set([true, false]));
  });

  it('fails the grading on an instruction that names no kind', async () => {
    await expect(outcomes([{ instruction: 'Write a poem.', candidate: 'A poem.', reference: 'No.' }])).rejects.toThrow(/HTTP 400/);
  });
});
