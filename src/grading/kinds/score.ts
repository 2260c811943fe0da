import { z } from 'zod';
import { A2rlError } from '../../util/errors.js';
import { type GraderKind, type Metrics, readJson } from './kind.js';

const scoredOutputSchema = z.object({
  public: z.object({ score: z.number().min(0).max(100) }).passthrough(),
  private: z.object({ score: z.number().min(0).max(100) }).passthrough(),
});

/** The task's grader entry writes the scores itself (result.json). */
export const scoreKind: GraderKind = {
  outputFile: 'result.json',
  judged: false,
  async score({ outFile }) {
    const output = scoredOutputSchema.safeParse(readJson(outFile));
    if (!output.success) throw new A2rlError('GRADING_FAILED', `the grader wrote no valid result: ${output.error.message}`);
    return output.data as Metrics;
  },
};
