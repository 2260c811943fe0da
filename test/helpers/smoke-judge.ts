import { startFakeLlm } from './fake-llm.js';

/**
 * alpacaeval's smoke judge: a test double for the paid LLM judge, a real local HTTP server speaking the OpenAI chat
 * completions protocol (startFakeLlm), deciding by a fixed rule instead of a model. It reads the instruction and the
 * two responses from either prompt src/grading/judge/llm.ts sends: the pairwise one (judgePrompt; rollouts' rewards),
 * answered A, B or TIE, and the reference harness's AlpacaEval ranking prompt (alpaca_eval_gpt5_2_fn; full-tier
 * grading), answered with a make_partial_leaderboard call ranking the one that follows first (output "m" on a tie,
 * as a judge with a bias for the first position would).
 *
 * The rule, for the smoke profile's instructions (tasks/hflm-tests/fixture_smoke_alpacaeval.py), each of which asks
 * for one thing of a kind named by one word of `smokeKinds`: a response follows the instruction when it names a
 * member of that kind and no member of another kind (whole words, any case). The one that follows wins; when both or
 * neither do, it is a tie. A prompt whose instruction names no kind, or none it can read, is answered with HTTP 400,
 * which fails the grading: the double judges nothing it was not made for.
 */

/** The kinds and their members: fixture_smoke_alpacaeval.KINDS, which this must match. */
export const smokeKinds: Readonly<Record<string, readonly string[]>> = {
  colour: ['red', 'blue', 'green', 'yellow'],
  fruit: ['apple', 'banana', 'cherry', 'mango'],
  animal: ['cat', 'dog', 'horse', 'tiger'],
  drink: ['tea', 'coffee', 'milk', 'juice'],
};

const hasWord = (text: string, word: string) => new RegExp(`\\b${word}\\b`, 'i').test(text);

/** Whether a response follows an instruction under the smoke rule; undefined when the instruction names no kind. */
function followsSmokeInstruction(instruction: string, response: string): boolean | undefined {
  const kind = Object.keys(smokeKinds).find((k) => hasWord(instruction, k));
  if (kind === undefined) return undefined;
  const named = Object.keys(smokeKinds).filter((k) => smokeKinds[k]!.some((member) => hasWord(response, member)));
  return named.length === 1 && named[0] === kind;
}

// judgePrompt's layout; the responses are matched lazily and the question is anchored at the end.
const promptPattern =
  /^Instruction:\n([\s\S]*?)\n\nResponse A:\n([\s\S]*?)\n\nResponse B:\n([\s\S]*)\n\nWhich response follows the instruction better\? Answer A, B or TIE\.$/;

// The ranking prompt's layout (alpaca-eval-annotators.ts): the instruction, then the outputs of "m" and "M".
const rankingPattern =
  /## Prompt\n\n\{\n {4}"instruction": """([\s\S]*?)""",\n\}\n\n## Model Outputs[\s\S]*?"model": "m",\n {8}"output": """([\s\S]*?)"""\n {4}\},\n {4}\{\n {8}"model": "M",\n {8}"output": """([\s\S]*?)"""\n {4}\}\n\}\n\n## Task/;

/** Starts the smoke judge; pass its baseUrl as --judge-url (any --judge-model). */
export function startSmokeJudge() {
  return startFakeLlm((request) => {
    const prompt = request.body.messages.find((m) => m.role === 'user')?.content ?? '';
    const pairwise = promptPattern.exec(prompt);
    const ranking = pairwise ? undefined : rankingPattern.exec(prompt);
    const match = pairwise ?? ranking;
    if (!match) return { status: 400 };
    const [, instruction, a, b] = match as unknown as [string, string, string, string];
    const followsA = followsSmokeInstruction(instruction, a);
    const followsB = followsSmokeInstruction(instruction, b);
    if (followsA === undefined || followsB === undefined) return { status: 400 };
    if (pairwise) return followsA === followsB ? 'TIE' : followsA ? 'A' : 'B';
    const first = followsA || !followsB ? 'm' : 'M';
    const ordered_models = [
      { model: first, rank: 1 },
      { model: first === 'm' ? 'M' : 'm', rank: 2 },
    ];
    const call = {
      id: 'call-1',
      type: 'function',
      function: { name: 'make_partial_leaderboard', arguments: JSON.stringify({ ordered_models }) },
    };
    return { choice: { message: { role: 'assistant', content: null, tool_calls: [call] } } };
  });
}
