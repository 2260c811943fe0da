import { startFakeLlm } from './fake-llm.js';

/**
 * DeepSearchQA's judge as a test double of the paid LLM: a real local HTTP server speaking the chat completions
 * protocol (startFakeLlm), answering the reference's binary prompt (src/grading/judge/llm.ts, answerJudgePrompt)
 * "correct" when the gold answer is in the prediction (any case), else "incorrect". Any other prompt is answered
 * with HTTP 400: the double judges nothing it was not made for.
 */
export function startAnswerJudge() {
  return startFakeLlm((request) => {
    const prompt = request.body.messages.find((m) => m.role === 'user')?.content ?? '';
    const match = /Gold answer: (.*)\n\s*Predicted answer: (.*)\n/.exec(prompt);
    if (!match) return { status: 400 };
    return match[2]!.toLowerCase().includes(match[1]!.toLowerCase()) ? 'correct' : 'incorrect';
  });
}
