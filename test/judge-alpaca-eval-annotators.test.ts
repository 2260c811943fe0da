import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  alpacaEvalAnnotators,
  type AlpacaEvalAnnotatorName,
  annotationRequest,
  type ChatChoice,
} from '../src/grading/judge/alpaca-eval-annotators.js';
import { LlmJudge } from '../src/grading/judge/llm.js';
import { PythonRandom } from '../src/grading/judge/python-random.js';
import { Store } from '../src/store/store.js';
import { type ChatRequest, startFakeLlm } from './helpers/fake-llm.js';
import { tempDir } from './helpers/sandbox.js';

/** What alpaca_eval 0.6.6's own code sends and reads, and the reference harness's recorded annotations; see scripts/alpaca-eval-annotators-golden.py. */
const golden = JSON.parse(readFileSync(new URL('./fixtures/alpaca-eval-annotators-golden.json', import.meta.url), 'utf8')) as {
  recorded: Array<{ instruction: string; raw_completion: string; preference: number }>;
  prompts: Array<{
    annotator: AlpacaEvalAnnotatorName;
    instruction: string;
    reference: string;
    response: string;
    switched: boolean;
    messages: Array<{ role: string; content: string }>;
    config_request: Record<string, unknown>;
  }>;
  parsing: Array<{
    annotator: AlpacaEvalAnnotatorName;
    instruction: string;
    switched: boolean;
    choice: ChatChoice;
    preference: number | null;
  }>;
};

const toolCall = (args: string): ChatChoice => ({ message: { content: null, tool_calls: [{ function: { arguments: args } }] } });

describe('AlpacaEval annotators, as alpaca_eval 0.6.6 runs them', () => {
  let cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.map((close) => close()));
    cleanup = [];
  });

  it('refuses an annotator it does not know, naming those it does', () => {
    const store = new Store(join(tempDir('annotators'), 'store.sqlite'));
    cleanup.push(async () => store.close());
    expect(() => new LlmJudge(store, { baseUrl: 'http://127.0.0.1:1/v1', model: 'm', annotator: 'gpt4' as never })).toThrow(
      'No AlpacaEval annotator "gpt4"; use one of: alpaca_eval_gpt5_2_fn, weighted_alpaca_eval_gpt4_turbo.',
    );
  });

  it('draws the order of the two outputs as CPython’s random.Random(str) does', () => {
    const seeds = ['is_switched_outputsWhat is 2+2?123', 'is_switched_outputs123', 'Écris 🙂', 'x'.repeat(500)];
    const python = `import json, random, sys
print(json.dumps([[random.Random(s).random() for _ in range(1)] + [random.Random(s).choices([False, True])[0]] for s in json.loads(sys.argv[1])]))`;
    const expected = JSON.parse(execFileSync('/usr/bin/python3', ['-c', python, JSON.stringify(seeds)], { encoding: 'utf8' })) as Array<
      [number, boolean]
    >;
    expect(seeds.map((seed) => [new PythonRandom(seed).random(), new PythonRandom(seed).choice([false, true])])).toEqual(expected);
  });

  it('reads the reference harness’s 100 recorded gpt-5.2 annotations into the preferences alpaca_eval made of them', () => {
    const annotator = alpacaEvalAnnotators.alpaca_eval_gpt5_2_fn;
    const read = golden.recorded.map((r) =>
      annotationRequest(annotator, { instruction: r.instruction, reference: 'reference', response: 'response' }).read(
        toolCall(r.raw_completion),
      ),
    );
    expect(read).toEqual(golden.recorded.map((r) => r.preference));
    expect(new Set(read)).toEqual(new Set([1, 2])); // both orders occur, so the switch is exercised
  });

  it('builds the chat messages alpaca_eval builds, in its order of the outputs', () => {
    for (const prompt of golden.prompts) {
      const request = annotationRequest(alpacaEvalAnnotators[prompt.annotator], prompt);
      expect(request.messages, `${prompt.annotator}: ${prompt.instruction}`).toEqual(prompt.messages);
    }
    expect(golden.prompts.some((p) => p.switched) && golden.prompts.some((p) => !p.switched)).toBe(true);
  });

  it('parses answers as alpaca_eval’s parsers do: tool calls, fenced JSON, log-probabilities, and what they reject', () => {
    for (const { annotator, instruction, choice, preference } of golden.parsing) {
      const read = annotationRequest(alpacaEvalAnnotators[annotator], { instruction, reference: 'reference', response: 'response' }).read(
        choice,
      );
      if (preference === null) expect(read, `${annotator} ${JSON.stringify(choice)}`).toBeNull();
      else expect(read, `${annotator} ${JSON.stringify(choice)}`).toBeCloseTo(preference, 12);
    }
  });

  it.each(['alpaca_eval_gpt5_2_fn', 'weighted_alpaca_eval_gpt4_turbo'] as const)(
    '%s through an OpenAI-compatible endpoint: the config’s request without max_tokens, the answers read back',
    async (name) => {
      const cases = golden.prompts.filter((p) => p.annotator === name);
      const answers = new Map<string, ChatChoice>();
      // Each answer prefers the model's response (whichever position alpaca_eval showed it in).
      const llm = await startFakeLlm((request: ChatRequest) => {
        const user = request.body.messages[1]!.content;
        const item = cases.find((c) => c.messages[1]!.content === user)!;
        const modelFirst = item.switched;
        const choice: ChatChoice =
          name === 'alpaca_eval_gpt5_2_fn'
            ? toolCall(
                JSON.stringify({
                  ordered_models: [
                    { model: modelFirst ? 'm' : 'M', rank: 1 },
                    { model: modelFirst ? 'M' : 'm', rank: 2 },
                  ],
                }),
              )
            : {
                message: { content: 'M' },
                logprobs: {
                  content: [
                    {
                      top_logprobs: [
                        { token: modelFirst ? 'm' : 'M', logprob: Math.log(0.8) },
                        { token: modelFirst ? 'M' : 'm', logprob: Math.log(0.2) },
                      ],
                    },
                  ],
                },
              };
        answers.set(item.instruction, choice);
        return { choice: choice as Record<string, unknown> };
      });
      cleanup.push(llm.close);
      const store = new Store(join(tempDir('annotators'), 'store.sqlite'));
      cleanup.push(async () => store.close());
      const judge = new LlmJudge(store, { baseUrl: llm.baseUrl, model: 'judge-1', annotator: name, apiKey: 'k' });
      const preferences = await judge.annotate(cases);
      expect(preferences.map((p) => p! - 1)).toEqual(cases.map(() => expect.closeTo(name === 'alpaca_eval_gpt5_2_fn' ? 1 : 0.8, 12)));
      expect(judge.id).toMatch(
        name === 'alpaca_eval_gpt5_2_fn'
          ? /^llm:judge-1@127\.0\.0\.1:\d+$/
          : /^llm:judge-1@127\.0\.0\.1:\d+\/weighted_alpaca_eval_gpt4_turbo$/,
      );
      for (const request of llm.requests) {
        const { model, messages, ...fields } = request.body;
        const item = cases.find((c) => c.messages[1]!.content === messages[1]!.content)!;
        expect(model).toBe('judge-1');
        expect(messages).toEqual(item.messages);
        const { max_tokens: maxTokens, ...configured } = item.config_request;
        // alpaca_eval's request, with the token limit reasoning models refuse dropped (ranking) or asked as they accept it (one token).
        expect(fields).toEqual(name === 'alpaca_eval_gpt5_2_fn' ? configured : { ...configured, max_completion_tokens: maxTokens });
        expect(request.headers.authorization).toBe('Bearer k');
      }
    },
  );
});
