import { startAnswerJudge } from './answer-judge.js';

/**
 * What a deepsearchqa run needs beyond the base model, started before its server and closed after it (the full-tier
 * smoke and the red team start it alike): search answered by a local corpus file, the server's provider, and
 * DeepSearchQA's binary judge as a local test double of the paid LLM.
 */
export async function startDeepsearchqaServices(
  corpus: string,
  judgeModel: string,
): Promise<{ serverArgs: string[]; close: () => Promise<void> }> {
  const judge = await startAnswerJudge();
  return {
    serverArgs: [
      '--search',
      'local',
      '--search-corpus',
      corpus,
      '--judge',
      'llm',
      '--judge-url',
      judge.baseUrl,
      '--judge-model',
      judgeModel,
    ],
    close: judge.close,
  };
}
