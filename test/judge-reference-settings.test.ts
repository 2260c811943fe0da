import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LlmJudge } from '../src/grading/judge/llm.js';
import { Store } from '../src/store/store.js';
import { startFakeLlm } from './helpers/fake-llm.js';
import { tempDir } from './helpers/sandbox.js';

/**
 * The reference's DeepSearchQA judge request (RD-Agent autorl_bench `benchmarks/deepsearchqa/eval.py`, `_judge_answer`,
 * through `APIBackend` with `rdagent/oai/llm_conf.py`'s defaults), written out here from the reference's text so that a
 * change on our side shows as a difference: its system prompt, its f-string (eight-space indents kept), temperature 0.5,
 * and nothing else (no max_tokens, no reasoning_effort, no penalties).
 */
function referenceBody(model: string, answerType: string, gold: string, predicted: string) {
  const userPrompt = `You are an answer evaluator. Compare the predicted answer to the gold answer.
        Question answer type: ${answerType}
        Gold answer: ${gold}
        Predicted answer: ${predicted}
        For "Single Answer": The predicted answer is correct if it contains the same key information as the gold answer.
        For "Set Answer": The predicted answer is correct if it contains ALL items from the gold answer (order doesn't matter, minor wording variations are OK).
        Reply with ONLY "correct" or "incorrect". No explanation.`;
  return {
    model,
    temperature: 0.5,
    messages: [
      { role: 'system', content: 'You are a strict answer evaluator.' },
      { role: 'user', content: userPrompt },
    ],
  };
}

describe("DeepSearchQA's judge asks as the reference harness does", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
  });

  it('sends the reference request body, byte for byte, and reads the verdict from its first line', async () => {
    const llm = await startFakeLlm((request) =>
      request.body.messages[1]!.content.includes('Gold answer: Oslo') ? 'Correct.' : 'incorrect',
    );
    closers.push(llm.close);
    const store = new Store(join(tempDir('judge-settings'), 'store.sqlite'));
    closers.push(async () => store.close());
    const judge = new LlmJudge(store, { baseUrl: llm.baseUrl, model: 'gpt-5.2', maxAttempts: 1 });

    const verdicts = await judge.judgeAnswers([
      { answerType: 'Single Answer', gold: 'Oslo', predicted: 'It is Oslo' },
      { answerType: 'Set Answer', gold: 'red, blue', predicted: 'red' },
    ]);

    expect(verdicts).toEqual([true, false]);
    const sent = llm.requests.map((request) => JSON.stringify(request.body)).sort();
    const expected = [
      referenceBody('gpt-5.2', 'Single Answer', 'Oslo', 'It is Oslo'),
      referenceBody('gpt-5.2', 'Set Answer', 'red, blue', 'red'),
    ]
      .map((body) => JSON.stringify(body))
      .sort();
    expect(sent).toEqual(expected);
  });
});
