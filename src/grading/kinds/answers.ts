import { z } from 'zod';
import { A2rlError } from '../../util/errors.js';
import { type GraderKind, type Metrics, readItems, round, type Split, splits } from './kind.js';

const answerItemSchema = z.object({
  id: z.string(),
  split: z.enum(splits),
  answer_type: z.string(),
  gold: z.string(),
  predicted: z.string(),
  /** The reference's string match of predicted against gold, computed by the grader (hflm.deepsearchqa.string_match). */
  string_match: z.boolean(),
});

/**
 * The task's grader entry writes each question's predicted and gold answers (items.jsonl); the judge gives each a binary
 * verdict (DeepSearchQA's reference judge, `Judge.judgeAnswers`), and where it could not be asked, the grader's string
 * match stands in, as in the reference. Score: the percentage judged correct per half; the whole-set figure (the
 * paper's) is kept with the private half, which the agent never sees.
 */
export const answersKind: GraderKind = {
  outputFile: 'items.jsonl',
  judged: true,
  async score({ task, outFile, judge }) {
    const items = readItems(outFile, answerItemSchema);
    if (!judge.judgeAnswers) {
      throw new A2rlError('GRADING_FAILED', `${task.id} needs an LLM judge's verdicts on its answers; the ${judge.kind} judge gives none`);
    }
    const verdicts = await judge.judgeAnswers(
      items.map((item) => ({ answerType: item.answer_type, gold: item.gold, predicted: item.predicted })),
    );
    const correct = items.map((item, i) => verdicts[i] ?? item.string_match);
    const figures = (indices: number[]) => {
      const right = indices.filter((i) => correct[i]).length;
      return {
        score: round(indices.length ? (100 * right) / indices.length : 0),
        correct: right,
        total: indices.length,
        string_matched: indices.filter((i) => verdicts[i] === null).length,
      };
    };
    const of = (split: Split) => items.flatMap((item, i) => (item.split === split ? [i] : []));
    const whole = figures(items.map((_, i) => i));
    const metrics: Metrics = {
      public: { ...figures(of('public')), judge: judge.id },
      private: {
        ...figures(of('private')),
        judge: judge.id,
        whole_score: whole.score,
        whole_correct: whole.correct,
        whole_total: whole.total,
      },
    };
    return metrics;
  },
};
