import { A2rlError } from '../../util/errors.js';
import { ALPACA_EVAL_LIBLINEAR_SEEDS, fitL1LogisticRegressionLikeLiblinear, type WeightedInstance } from './liblinear-l1-logistic.js';

/**
 * AlpacaEval 2.0's length-controlled win rate, computed as alpaca_eval 0.6.6 computes it
 * (`metrics/glm_winrate.py`, `get_length_controlled_winrate`), for the full tier (issue 17).
 * The micro tier keeps its simpler `lengthControlledWinRate` in `win-rate.ts`.
 *
 * What alpaca_eval does, and this module with it:
 * - Preferences are on its scale: 1 the baseline wins, 2 the model wins, fractions in between
 *   (weighted annotators), and 0 or 1.5 a tie; 0 is read as 1.5. The GLM's target is
 *   preference − 1 ∈ [0, 1], used as a soft label (each row is duplicated as class 1 with
 *   weight p and class 0 with weight 1 − p).
 * - Unannotated records (null preference) are left out of the plain win rate and of the fit,
 *   but still predicted, so they count in the length-controlled mean.
 * - The length term is tanh((baseline length − model length) / s), s the sample standard
 *   deviation (n − 1) of that difference over all the model's records. Lengths are in
 *   characters (Python's `str.len`, i.e. code points, not UTF-16 units).
 * - GLM `length_controlled_v1`: tanh(length term) + instruction difficulty + baseline flag, no
 *   intercept. It is fitted together with the two gamed baselines' annotations from
 *   `df_gamed.csv` (baseline flag 0, instance weight λ/2 = 0.1 with λ = 0.2, the model's rows
 *   weight 1): that is the "regularisation to the baseline". `length_controlled_noreg` has
 *   neither the gamed rows nor weights; `length_controlled_minimal` also drops the difficulty.
 * - The fit is scikit-learn's LogisticRegressionCV: L1 penalty, liblinear (random_state 123),
 *   tolerance 1e-4, C chosen among logspace(−4, 4, 10) by 5-fold GroupKFold (a row's two copies
 *   in one fold; with scikit-learn ≥ 1.6 row r of N goes to fold (N − 1 − r) mod 5) scored by
 *   the weighted soft-label log loss summed over folds, then refitted on all rows with the best C.
 *   liblinear stops early, so its answer depends on its seeds; see `liblinear-l1-logistic.ts`.
 * - The reported figure is 100 × the mean, over the model's records, of the predicted
 *   preference at zero length difference: σ(w_difficulty·difficulty + w_baseline).
 * - alpaca_eval takes the instruction difficulty from `df_gamed.csv` by the record's position
 *   and fails (IndexError) on a position the file lacks. Here each record carries its
 *   difficulty, and a record without one is refused for the GLMs that use it.
 *
 * Deviations: alpaca_eval drops preferences outside [1, 2] from the plain win rate (and feeds
 * them to the GLM); they are refused here. Its special case of the model being the baseline
 * itself (reported as exactly 50) is left to the caller, who knows the names. Figures match
 * alpaca_eval run with scikit-learn 1.9.1 (fold assignment, seeds, liblinear) to ~1e-12; being
 * a tolerance-stopped fit, a one-ulp difference in an input (V8's Math.tanh against numpy's
 * SIMD tanh; `df_gamed.csv` parsed other than by pandas' default float parser) could in
 * principle flip one of its stopping tests and move the result by up to ~1e-3 points; in 95
 * random cases compared with alpaca_eval, none did.
 */

/** One instruction: the judge's preference and both outputs' lengths. */
export interface AlpacaEvalRecord {
  /** alpaca_eval's scale (1 baseline, 2 model, 0 or 1.5 tie, fractions between); null when not annotated. */
  preference: number | null;
  modelOutputLength: number;
  baselineOutputLength: number;
  /** The instruction's difficulty from alpaca_eval's `df_gamed.csv`; needed unless the GLM is `length_controlled_minimal`. */
  instructionDifficulty?: number;
}

/** One row of `df_gamed.csv` (a gamed baseline's annotation), in the GLM's own terms. */
export interface GamedBaselineRow {
  /** Already in [0, 1] (1: the gamed baseline wins), as the CSV stores it. */
  preference: number;
  /** The CSV's `std_delta_len`, already standardised. */
  standardisedLengthDelta: number;
  instructionDifficulty: number;
}

export type AlpacaEvalGlm = 'length_controlled_v1' | 'length_controlled_noreg' | 'length_controlled_minimal';

export interface AlpacaEvalLengthControlledResult {
  /** alpaca_eval's `win_rate`: 100 × mean(preference − 1) over annotated records. */
  winRate: number;
  /** alpaca_eval's `length_controlled_winrate`. */
  lengthControlledWinRate: number;
  /** alpaca_eval's `lc_standard_error`: 100 × standard error of the per-record predictions. */
  lengthControlledStandardError: number;
  /** The C that cross-validation chose. */
  regularisationC: number;
  /** GLM weights in formula order: tanh(length), [difficulty,] baseline flag. */
  coefficients: number[];
}

const REGULARISE_TO_BASELINE_LAMBDA = 0.2;
const CROSS_VALIDATION_FOLDS = 5;
/** np.logspace(-4, 4, 10), LogisticRegressionCV's default grid, as numpy rounds it (V8's `**` differs in the last bit). */
const C_GRID = [
  0.0001, 0.000774263682681127, 0.005994842503189409, 0.046415888336127774, 0.3593813663804626, 2.782559402207126, 21.54434690031882,
  166.81005372000558, 1291.5496650148827, 10000.0,
];
const LOG_LOSS_CLIP = 1e-15;

interface GlmRow {
  features: number[];
  /** preference − 1, in [0, 1]. */
  target: number;
  weight: number;
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));
const invalid = (message: string) => new A2rlError('INVALID_INPUT', message);

/** Builds records from parallel arrays (the shape the judge collects), refusing arrays of different lengths. */
export function alpacaEvalRecordsFromColumns(columns: {
  preferences: ReadonlyArray<number | null>;
  modelOutputLengths: readonly number[];
  baselineOutputLengths: readonly number[];
  instructionDifficulties?: readonly number[];
}): AlpacaEvalRecord[] {
  const n = columns.preferences.length;
  const lengths = {
    modelOutputLengths: columns.modelOutputLengths.length,
    baselineOutputLengths: columns.baselineOutputLengths.length,
    ...(columns.instructionDifficulties ? { instructionDifficulties: columns.instructionDifficulties.length } : {}),
  };
  for (const [name, length] of Object.entries(lengths)) {
    if (length !== n) throw invalid(`${name} has ${length} entries but preferences has ${n}; give one per instruction`);
  }
  return columns.preferences.map((preference, i) => ({
    preference,
    modelOutputLength: columns.modelOutputLengths[i]!,
    baselineOutputLength: columns.baselineOutputLengths[i]!,
    ...(columns.instructionDifficulties ? { instructionDifficulty: columns.instructionDifficulties[i]! } : {}),
  }));
}

/** AlpacaEval 2.0's length-controlled (and plain) win rate of a model against the baseline; see the module comment. */
export function alpacaEvalLengthControlledWinRate(
  records: readonly AlpacaEvalRecord[],
  options: { glm?: AlpacaEvalGlm; gamedBaselineRows?: readonly GamedBaselineRow[] } = {},
): AlpacaEvalLengthControlledResult {
  const glm = options.glm ?? 'length_controlled_v1';
  const usesDifficulty = glm !== 'length_controlled_minimal';
  const regularised = glm === 'length_controlled_v1';
  validateRecords(records, usesDifficulty);
  const gamedRows = options.gamedBaselineRows ?? [];
  if (regularised && gamedRows.length === 0) {
    throw invalid('length_controlled_v1 regularises towards the gamed baselines: pass the rows of alpaca_eval’s df_gamed.csv');
  }
  if (!regularised && gamedRows.length > 0) throw invalid(`${glm} does not use the gamed baselines’ rows; pass none`);
  validateGamedRows(gamedRows);

  // Preference 0 is alpaca_eval's older spelling of a tie.
  const targets = records.map((r) => (r.preference === null ? null : (r.preference === 0 ? 1.5 : r.preference) - 1));
  const annotated = targets.filter((t): t is number => t !== null);
  const winRate = (100 * annotated.reduce((a, b) => a + b, 0)) / annotated.length;

  const lengthDeltas = records.map((r) => r.baselineOutputLength - r.modelOutputLength);
  const deltaSd = sampleStandardDeviation(lengthDeltas);
  if (!(deltaSd > 0)) {
    throw invalid(
      'the length differences have no spread (fewer than two records, or all equal), so the length term cannot be standardised',
    );
  }
  const featuresOf = (lengthTerm: number, difficulty: number, isModelRow: boolean) =>
    usesDifficulty ? [Math.tanh(lengthTerm), difficulty, isModelRow ? 1 : 0] : [Math.tanh(lengthTerm), isModelRow ? 1 : 0];

  const rows: GlmRow[] = [
    ...gamedRows.map((g) => ({
      features: featuresOf(g.standardisedLengthDelta, g.instructionDifficulty, false),
      target: g.preference,
      weight: REGULARISE_TO_BASELINE_LAMBDA / 2, // two gamed baselines share λ
    })),
    ...records.flatMap((r, i) =>
      targets[i] === null
        ? []
        : [{ features: featuresOf(lengthDeltas[i]! / deltaSd, r.instructionDifficulty ?? 0, true), target: targets[i]!, weight: 1 }],
    ),
  ];
  if (rows.length < CROSS_VALIDATION_FOLDS) {
    throw invalid(`${rows.length} annotated rows cannot be split into ${CROSS_VALIDATION_FOLDS} cross-validation folds`);
  }

  const { C, coefficients } = crossValidatedFit(rows);
  const predictions = records.map((r) => sigmoid(dot(featuresOf(0, r.instructionDifficulty ?? 0, true), coefficients)));
  const meanPrediction = predictions.reduce((a, b) => a + b, 0) / predictions.length;
  return {
    winRate,
    lengthControlledWinRate: 100 * meanPrediction,
    lengthControlledStandardError: (100 * sampleStandardDeviation(predictions)) / Math.sqrt(predictions.length),
    regularisationC: C,
    coefficients,
  };
}

/**
 * LogisticRegressionCV(cv=GroupKFold(5), Cs=10, penalty="l1", solver="liblinear",
 * fit_intercept=False) with alpaca_eval's soft-label duplication and log-loss scorer.
 */
function crossValidatedFit(rows: readonly GlmRow[]): { C: number; coefficients: number[] } {
  const featureCount = rows[0]!.features.length;
  // alpaca_eval's data_dup: all rows as class 1 (weight p·w), then all rows as class 0 (weight (1 − p)·w).
  const instances: Array<WeightedInstance & { row: number }> = [
    ...rows.map((r, row) => ({ features: r.features, label: 1 as const, weight: r.target * r.weight, row })),
    ...rows.map((r, row) => ({ features: r.features, label: 0 as const, weight: (1 - r.target) * r.weight, row })),
  ];
  // GroupKFold without shuffling: equal-sized groups, stable argsort reversed, then round robin.
  const foldOfRow = (row: number) => (rows.length - 1 - row) % CROSS_VALIDATION_FOLDS;

  const totalScores = C_GRID.map(() => 0);
  for (let fold = 0; fold < CROSS_VALIDATION_FOLDS; fold++) {
    const train = instances.filter((instance) => foldOfRow(instance.row) !== fold);
    const test = instances.filter((instance) => foldOfRow(instance.row) === fold);
    C_GRID.forEach((C, k) => {
      const coefficients = fitL1LogisticRegressionLikeLiblinear(train, C, featureCount, ALPACA_EVAL_LIBLINEAR_SEEDS[k]!);
      totalScores[k]! += -softLabelLogLoss(test, rows, coefficients);
    });
  }
  // np.argmax: the first of equal best scores.
  const best = totalScores.reduce((bestIndex, score, k) => (score > totalScores[bestIndex]! ? k : bestIndex), 0);
  const C = C_GRID[best]!;
  return { C, coefficients: fitL1LogisticRegressionLikeLiblinear(instances, C, featureCount, ALPACA_EVAL_LIBLINEAR_SEEDS[0]) };
}

/**
 * alpaca_eval's `logloss_continuous`: both copies of a row are scored against the row's own
 * preference, weighted by the row's weight, averaged over the instances (not the weights).
 */
function softLabelLogLoss(
  test: ReadonlyArray<WeightedInstance & { row: number }>,
  rows: readonly GlmRow[],
  coefficients: number[],
): number {
  let total = 0;
  for (const instance of test) {
    const { target, weight } = rows[instance.row]!;
    const predicted = Math.min(Math.max(sigmoid(dot(instance.features, coefficients)), LOG_LOSS_CLIP), 1 - LOG_LOSS_CLIP);
    total += (target * Math.log(predicted) + (1 - target) * Math.log(1 - predicted)) * weight;
  }
  return -total / test.length;
}

function validateRecords(records: readonly AlpacaEvalRecord[], usesDifficulty: boolean): void {
  if (records.length === 0) throw invalid('no records: the win rate needs at least one annotated instruction');
  records.forEach((r, i) => {
    if (r.preference !== null && !(Number.isFinite(r.preference) && (r.preference === 0 || (r.preference >= 1 && r.preference <= 2)))) {
      throw invalid(`record ${i} has preference ${r.preference}; alpaca_eval preferences are 1 to 2 (0 or 1.5 for a tie), or null`);
    }
    for (const key of ['modelOutputLength', 'baselineOutputLength'] as const) {
      if (!(Number.isFinite(r[key]) && r[key] >= 0)) throw invalid(`record ${i} has ${key} ${r[key]}; lengths are character counts`);
    }
    if (usesDifficulty && !Number.isFinite(r.instructionDifficulty)) {
      throw invalid(`record ${i} has no instructionDifficulty; take it from alpaca_eval's df_gamed.csv, or use length_controlled_minimal`);
    }
  });
  if (records.every((r) => r.preference === null)) throw invalid('no record is annotated: every preference is null');
}

function validateGamedRows(rows: readonly GamedBaselineRow[]): void {
  rows.forEach((g, i) => {
    if (!(Number.isFinite(g.preference) && g.preference >= 0 && g.preference <= 1)) {
      throw invalid(`gamed baseline row ${i} has preference ${g.preference}; df_gamed.csv stores them in [0, 1]`);
    }
    if (!Number.isFinite(g.standardisedLengthDelta) || !Number.isFinite(g.instructionDifficulty)) {
      throw invalid(`gamed baseline row ${i} lacks a finite standardisedLengthDelta or instructionDifficulty`);
    }
  });
}

function sampleStandardDeviation(values: readonly number[]): number {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (values.length - 1));
}

function dot(a: readonly number[], b: readonly number[]): number {
  return a.reduce((sum, value, i) => sum + value * b[i]!, 0);
}
