import type { Task } from '../../tasks/task.js';

/** One comparison, in one order: which of two outputs follows the instruction better. */
export interface PairwiseQuery {
  id: string;
  instruction: string;
  /** The task's machine-readable constraints, for judges that check them. */
  constraints: unknown;
  output_a: string;
  output_b: string;
}

export type Preference = 'a' | 'b' | 'tie';

/**
 * A pairwise judge. Implementations: the task's deterministic rubric (the default) and an
 * LLM behind any OpenAI-compatible endpoint. A judge that cannot judge throws: a grading
 * then fails with the reason, never scores 0.
 */
export interface Judge {
  /** Names the judge in every grade it contributes to: grades by different judges never mix. */
  readonly id: string;
  /** Which of the registry's judges this is. */
  readonly kind: 'rubric' | 'llm';
  /** One preference per query, in order. */
  prefer(task: Task, queries: PairwiseQuery[]): Promise<Preference[]>;
  /**
   * AlpacaEval's annotation of each item, as alpaca_eval's preference (1 the reference is better, 2 the model's, null
   * unparsed): what a full-tier judged task is scored from. Judges without it grade micro tasks only.
   */
  annotate?(items: AnnotationItem[]): Promise<Array<number | null>>;
  /**
   * A binary verdict on each predicted answer against its gold one (DeepSearchQA's reference judge): true correct, false
   * incorrect, null where the judge could not be asked (the caller falls back to a string match, as the reference does).
   */
  judgeAnswers?(items: AnswerJudgeItem[]): Promise<Array<boolean | null>>;
}

/** One predicted answer for a binary judge: the gold answer and its type ("Single Answer" or "Set Answer"). */
export interface AnswerJudgeItem {
  answerType: string;
  gold: string;
  predicted: string;
}

/** One instruction for an AlpacaEval annotator: the reference output (alpaca_eval's baseline) and the model's. */
export interface AnnotationItem {
  instruction: string;
  reference: string;
  response: string;
}

export interface JudgedItem {
  id: string;
  instruction: string;
  constraints: unknown;
  candidate: string;
  reference: string;
}

/**
 * Candidate-against-reference outcomes in [0, 1] (1 win, 0.5 tie, 0 loss), each judged in
 * both orders and averaged, so a judge's preference for a position cancels out.
 */
export async function judgeAgainstReferences(judge: Judge, task: Task, items: JudgedItem[]): Promise<number[]> {
  const queries = items.flatMap((item): PairwiseQuery[] => [
    {
      id: `${item.id}#candidate-first`,
      instruction: item.instruction,
      constraints: item.constraints,
      output_a: item.candidate,
      output_b: item.reference,
    },
    {
      id: `${item.id}#reference-first`,
      instruction: item.instruction,
      constraints: item.constraints,
      output_a: item.reference,
      output_b: item.candidate,
    },
  ]);
  const preferences = await judge.prefer(task, queries);
  const points = (preference: Preference, candidateSide: 'a' | 'b') => (preference === candidateSide ? 1 : preference === 'tie' ? 0.5 : 0);
  return items.map((_, i) => (points(preferences[2 * i]!, 'a') + points(preferences[2 * i + 1]!, 'b')) / 2);
}
