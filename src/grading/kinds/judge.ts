import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Task } from '../../tasks/task.js';
import { A2rlError } from '../../util/errors.js';
import { alpacaEvalLengthControlledWinRate, type GamedBaselineRow } from '../judge/alpaca-eval-lc.js';
import { type Judge, judgeAgainstReferences } from '../judge/judge.js';
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
 * The task's grader entry writes responses with references (items.jsonl); the task's tier decides how they are judged
 * and scored.
 * - micro: the judge compares each response with its reference in both orders (1 win, 0.5 tie, 0 loss, averaged);
 *   the win rate is the score, with the simple length-controlled figure beside it.
 * - full: the judge's AlpacaEval annotator gives alpaca_eval's preference per instruction (alpaca-eval-annotators.ts),
 *   and the score is AlpacaEval 2.0's length-controlled win rate as alpaca_eval 0.6.6 computes it
 *   (`length_controlled_v1`, alpaca-eval-lc.ts), fitted on each half for the halves' scores, and once over every
 *   instruction for the whole-set figure the paper reports (`whole_score`, kept with the private half, which the agent
 *   never sees, since with the public score it would give the private one away).
 */
export const judgeKind: GraderKind = {
  outputFile: 'items.jsonl',
  judged: true,
  async score({ task, outFile, judge }) {
    const items = readItems(outFile, judgedItemSchema);
    return task.tier === 'full' ? scoreFullTier(task, items, judge) : scoreMicroTier(task, items, judge);
  },
};

async function scoreMicroTier(task: Task, items: JudgedItem[], judge: Judge) {
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
    const indices = indicesOf(items, split);
    const splitOutcomes = indices.map((i) => outcomes[i]!);
    return {
      score: round(winRate(splitOutcomes)),
      win_rate: round(winRate(splitOutcomes)),
      lc_win_rate: round(
        lengthControlledWinRate(
          splitOutcomes,
          indices.map((i) => items[i]!.response.length),
          indices.map((i) => items[i]!.reference.length),
        ),
      ),
      comparisons: indices.length,
      mean_length: meanLength(items, indices),
      judge: judge.id,
    };
  };
  return { public: metrics('public'), private: metrics('private') };
}

async function scoreFullTier(task: Task, items: JudgedItem[], judge: Judge) {
  // Checked before any judging: assets without them fail the grading before a single judge request is paid for.
  const gamedBaselineRows = readGamedBaselines(join(task.paths.evalData, gamedBaselinesFile), task.id);
  const difficulties = items.map((item) => {
    if (item.instruction_difficulty === undefined) {
      throw new A2rlError(
        'GRADING_FAILED',
        `item ${item.id} has no instruction_difficulty, which the length-controlled win rate needs: prepare the assets again (a2rl prepare ${task.id})`,
      );
    }
    return item.instruction_difficulty;
  });
  if (!judge.annotate) {
    throw new A2rlError('GRADING_FAILED', `${task.id} needs an LLM judge's AlpacaEval annotation; the ${judge.kind} judge has none`);
  }
  const preferences = await judge.annotate(
    items.map((item) => ({ instruction: item.instruction, reference: item.reference, response: item.response })),
  );
  /** alpaca_eval's figures over these items; those the judge left unannotated are left out, as alpaca_eval drops them. */
  const lengthControlled = (indices: number[]) => {
    const annotated = indices.filter((i) => preferences[i] !== null);
    let result;
    try {
      result = alpacaEvalLengthControlledWinRate(
        annotated.map((i) => ({
          preference: preferences[i]!,
          modelOutputLength: codePoints(items[i]!.response),
          baselineOutputLength: codePoints(items[i]!.reference),
          instructionDifficulty: difficulties[i]!,
        })),
        { glm: 'length_controlled_v1', gamedBaselineRows },
      );
    } catch (error) {
      throw new A2rlError('GRADING_FAILED', `the length-controlled win rate cannot be computed: ${(error as Error).message}`, {
        cause: error,
      });
    }
    return {
      lc_win_rate: round(result.lengthControlledWinRate),
      lc_standard_error: round(result.lengthControlledStandardError),
      win_rate: round(result.winRate),
      comparisons: annotated.length,
      unannotated: indices.length - annotated.length,
    };
  };
  const metrics = (split: Split) => {
    const indices = indicesOf(items, split);
    const figures = lengthControlled(indices);
    return { score: figures.lc_win_rate, ...figures, mean_length: meanLength(items, indices), judge: judge.id };
  };
  const whole = lengthControlled(items.map((_, i) => i));
  return {
    public: metrics('public'),
    private: {
      ...metrics('private'),
      whole_score: whole.lc_win_rate,
      whole_lc_standard_error: whole.lc_standard_error,
      whole_win_rate: whole.win_rate,
      whole_comparisons: whole.comparisons,
    },
  };
}

const indicesOf = (items: JudgedItem[], split: Split) => items.map((item, i) => (item.split === split ? i : -1)).filter((i) => i >= 0);

const meanLength = (items: JudgedItem[], indices: number[]) =>
  round(indices.reduce((sum, i) => sum + items[i]!.response.length, 0) / Math.max(1, indices.length));
