import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Task, Tier } from '../../tasks/task.js';
import { A2rlError } from '../../util/errors.js';
import { alpacaEvalLengthControlledWinRate, type GamedBaselineRow } from '../judge/alpaca-eval-lc.js';
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
  /** Full tier: the instruction's difficulty from alpaca_eval's df_gamed.csv, which its length-controlled win rate needs. */
  instruction_difficulty: z.number().optional(),
});
type JudgedItem = z.infer<typeof judgedItemSchema>;

/** One split's metrics from its items and their outcomes (1 win, 0.5 tie, 0 loss against the reference). */
type SplitScorer = (items: JudgedItem[], outcomes: number[]) => Record<string, number> & { score: number };

/**
 * How each tier turns outcomes into a score. micro: the win rate, with the simple length-controlled figure beside it.
 * full: AlpacaEval 2.0's length-controlled win rate as the paper reports it (alpaca_eval 0.6.6 `length_controlled_v1`).
 */
const scorers: Readonly<Record<Tier, (task: Task) => SplitScorer>> = {
  micro: () => (items, outcomes) => ({
    score: round(winRate(outcomes)),
    win_rate: round(winRate(outcomes)),
    lc_win_rate: round(
      lengthControlledWinRate(
        outcomes,
        items.map((item) => item.response.length),
        items.map((item) => item.reference.length),
      ),
    ),
  }),
  full: (task) => {
    // Read before any judging: assets without it fail the grading before a single judge request is paid for.
    const gamedBaselineRows = readGamedBaselines(join(task.paths.evalData, gamedBaselinesFile), task.id);
    return (items, outcomes) => {
      const records = items.map((item, i) => {
        if (item.instruction_difficulty === undefined) {
          throw new A2rlError(
            'GRADING_FAILED',
            `item ${item.id} has no instruction_difficulty, which the length-controlled win rate needs: prepare the assets again (a2rl prepare ${task.id})`,
          );
        }
        return {
          // alpaca_eval's scale: 1 the reference (its baseline) wins, 2 the model wins, 1.5 a tie.
          preference: 1 + outcomes[i]!,
          modelOutputLength: codePoints(item.response),
          baselineOutputLength: codePoints(item.reference),
          instructionDifficulty: item.instruction_difficulty,
        };
      });
      let result;
      try {
        result = alpacaEvalLengthControlledWinRate(records, { glm: 'length_controlled_v1', gamedBaselineRows });
      } catch (error) {
        throw new A2rlError('GRADING_FAILED', `the length-controlled win rate cannot be computed: ${(error as Error).message}`, {
          cause: error,
        });
      }
      return {
        score: round(result.lengthControlledWinRate),
        lc_win_rate: round(result.lengthControlledWinRate),
        lc_standard_error: round(result.lengthControlledStandardError),
        win_rate: round(result.winRate),
      };
    };
  },
};

/** Where `a2rl prepare` puts the gamed baselines' rows, in the task's hidden eval folder (tasks/hflm/assets.py). */
export const gamedBaselinesFile = 'gamed_baselines.jsonl';

const gamedRowSchema = z.object({ preference: z.number(), std_delta_len: z.number(), instruction_difficulty: z.number() });

function readGamedBaselines(file: string, taskId: string): GamedBaselineRow[] {
  const prepareAgain = `prepare the assets again (a2rl prepare ${taskId})`;
  if (!existsSync(file)) {
    throw new A2rlError('GRADING_FAILED', `${file} is missing: the length-controlled win rate needs it; ${prepareAgain}`);
  }
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  if (lines.length === 0) throw new A2rlError('GRADING_FAILED', `${file} holds no rows: ${prepareAgain}`);
  return lines.map((line, i) => {
    let parsed;
    try {
      parsed = gamedRowSchema.safeParse(JSON.parse(line));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      throw new A2rlError(
        'GRADING_FAILED',
        `${file} line ${i + 1} is not a gamed baseline row {"preference", "std_delta_len", "instruction_difficulty"} of numbers: ${prepareAgain}`,
      );
    }
    const row = parsed.data;
    return { preference: row.preference, standardisedLengthDelta: row.std_delta_len, instructionDifficulty: row.instruction_difficulty };
  });
}

/** Python's len(str), as alpaca_eval measures outputs: code points, not UTF-16 units. */
const codePoints = (text: string) => [...text].length;

/**
 * The task's grader entry writes responses with references (items.jsonl); the judge compares
 * each response with its reference in both orders; the task's tier decides the score (see `scorers`).
 */
export const judgeKind: GraderKind = {
  outputFile: 'items.jsonl',
  judged: true,
  async score({ task, outFile, judge }) {
    const scorer = scorers[task.tier](task);
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
      return {
        ...scorer(
          indices.map((i) => items[i]!),
          indices.map((i) => outcomes[i]!),
        ),
        comparisons: indices.length,
        mean_length: round(indices.reduce((sum, i) => sum + items[i]!.response.length, 0) / Math.max(1, indices.length)),
        judge: judge.id,
      };
    };
    return { public: metrics('public'), private: metrics('private') };
  },
};
