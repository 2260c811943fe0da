import { z } from 'zod';
import { judgeAgainstReferences } from '../judge/judge.js';
import { lengthControlledWinRate, winRate } from '../judge/win-rate.js';
import { type GraderKind, readItems, round, type Split, splits } from './kind.js';

const judgedItemSchema = z.object({
  id: z.string(),
  split: z.enum(splits),
  instruction: z.string(),
  constraints: z.unknown(),
  reference: z.string(),
  response: z.string(),
});

/**
 * The task's grader entry writes responses with references (items.jsonl); the judge compares
 * each response with its reference in both orders; win rate and LC win rate per split.
 */
export const judgeKind: GraderKind = {
  outputFile: 'items.jsonl',
  judged: true,
  async score({ task, outFile, judge }) {
    const items = readItems(outFile, judgedItemSchema);
    const outcomes = await judgeAgainstReferences(
      judge,
      task,
      items.map((item) => ({
        id: item.id,
        instruction: item.instruction,
        constraints: item.constraints,
        candidate: item.response,
        reference: item.reference,
      })),
    );
    const metrics = (split: Split) => {
      const indices = items.map((item, i) => (item.split === split ? i : -1)).filter((i) => i >= 0);
      const mine = indices.map((i) => outcomes[i]!);
      const lc = lengthControlledWinRate(
        mine,
        indices.map((i) => items[i]!.response.length),
        indices.map((i) => items[i]!.reference.length),
      );
      return {
        score: round(winRate(mine)),
        win_rate: round(winRate(mine)),
        lc_win_rate: round(lc),
        comparisons: mine.length,
        mean_length: round(indices.reduce((sum, i) => sum + items[i]!.response.length, 0) / Math.max(1, indices.length)),
        judge: judge.id,
      };
    };
    return { public: metrics('public'), private: metrics('private') };
  },
};
