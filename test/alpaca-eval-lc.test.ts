import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  alpacaEvalLengthControlledWinRate,
  alpacaEvalRecordsFromColumns,
  type AlpacaEvalGlm,
  type AlpacaEvalLengthControlledResult,
  type AlpacaEvalRecord,
  type GamedBaselineRow,
} from '../src/grading/judge/alpaca-eval-lc.js';
import { isA2rlError } from '../src/util/errors.js';

/** Inputs and alpaca_eval 0.6.6's own outputs for them; see scripts/alpaca-eval-lc-golden.py. */
const golden = JSON.parse(readFileSync(new URL('./fixtures/alpaca-eval-lc-golden.json', import.meta.url), 'utf8')) as {
  cases: Array<{
    name: string;
    glm: AlpacaEvalGlm;
    records: AlpacaEvalRecord[];
    gamedBaselineRows?: GamedBaselineRow[];
    expected: AlpacaEvalLengthControlledResult;
  }>;
};

describe('AlpacaEval 2.0 length-controlled win rate, as alpaca_eval 0.6.6 computes it', () => {
  it.each(golden.cases.map((c) => [c.name, c] as const))('matches alpaca_eval on %s to 1e-6', (_, golden) => {
    const result = alpacaEvalLengthControlledWinRate(golden.records, {
      glm: golden.glm,
      ...(golden.gamedBaselineRows ? { gamedBaselineRows: golden.gamedBaselineRows } : {}),
    });
    expect(result.regularisationC).toBeCloseTo(golden.expected.regularisationC, 12);
    expect(Math.abs(result.winRate - golden.expected.winRate)).toBeLessThan(1e-6);
    expect(Math.abs(result.lengthControlledWinRate - golden.expected.lengthControlledWinRate)).toBeLessThan(1e-6);
    expect(Math.abs(result.lengthControlledStandardError - golden.expected.lengthControlledStandardError)).toBeLessThan(1e-6);
    result.coefficients.forEach((c, i) => expect(Math.abs(c - golden.expected.coefficients[i]!)).toBeLessThan(1e-6));
  });

  const v1 = golden.cases.find((c) => c.glm === 'length_controlled_v1')!;
  const refused = (run: () => unknown, message: RegExp) => {
    try {
      run();
    } catch (error) {
      expect(isA2rlError(error, 'INVALID_INPUT')).toBe(true);
      expect((error as Error).message).toMatch(message);
      return;
    }
    throw new Error('expected the input to be refused');
  };

  it('refuses no records, and records none of which is annotated', () => {
    refused(() => alpacaEvalLengthControlledWinRate([], { gamedBaselineRows: v1.gamedBaselineRows! }), /no records/);
    const unannotated = v1.records.map((r) => ({ ...r, preference: null }));
    refused(() => alpacaEvalLengthControlledWinRate(unannotated, { gamedBaselineRows: v1.gamedBaselineRows! }), /no record is annotated/);
  });

  it('refuses columns of different lengths', () => {
    refused(
      () => alpacaEvalRecordsFromColumns({ preferences: [1, 2, 1.5], modelOutputLengths: [10, 20, 30], baselineOutputLengths: [10, 20] }),
      /baselineOutputLengths has 2 entries but preferences has 3/,
    );
    refused(
      () =>
        alpacaEvalRecordsFromColumns({
          preferences: [1, 2],
          modelOutputLengths: [10, 20],
          baselineOutputLengths: [15, 25],
          instructionDifficulties: [0.3],
        }),
      /instructionDifficulties has 1 entries/,
    );
  });

  it('refuses a record without difficulty for a GLM that uses it, and v1 without the gamed baselines', () => {
    const withoutDifficulty = v1.records.map((r, i) => (i === 3 ? { ...r, instructionDifficulty: undefined } : r));
    refused(
      () => alpacaEvalLengthControlledWinRate(withoutDifficulty, { gamedBaselineRows: v1.gamedBaselineRows! }),
      /record 3 has no instructionDifficulty/,
    );
    refused(() => alpacaEvalLengthControlledWinRate(v1.records), /df_gamed\.csv/);
  });

  it('refuses preferences off alpaca_eval’s scale and lengths that cannot be standardised', () => {
    const offScale = v1.records.map((r, i) => (i === 0 ? { ...r, preference: 3 } : r));
    refused(() => alpacaEvalLengthControlledWinRate(offScale, { gamedBaselineRows: v1.gamedBaselineRows! }), /record 0 has preference 3/);
    const sameLengths = v1.records.map((r) => ({ ...r, modelOutputLength: 100, baselineOutputLength: 90 }));
    refused(() => alpacaEvalLengthControlledWinRate(sameLengths, { gamedBaselineRows: v1.gamedBaselineRows! }), /cannot be standardised/);
  });
});
