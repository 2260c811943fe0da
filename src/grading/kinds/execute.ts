import { join } from 'node:path';
import { executePrograms, executionItemSchema, wholeProgramRunnerVersion } from '../execution.js';
import { type GraderKind, readItems, round, type Split } from './kind.js';

/**
 * The task's grader entry writes programs with test inputs and expected outputs
 * (items.jsonl); each runs in a sandbox of its own against its hidden tests; pass@1 per split.
 */
export const executeKind: GraderKind = {
  outputFile: 'items.jsonl',
  judged: false,
  serverPart: `runner:${wholeProgramRunnerVersion}`,
  async score({ task, outFile, outDir, backend }) {
    const items = readItems(outFile, executionItemSchema);
    const results = await executePrograms(backend, task, items, join(outDir, 'programs'));
    const metrics = (split: Split) => {
      const mine = results.filter((r) => r.split === split);
      const solved = mine.filter((r) => r.total > 0 && r.passed === r.total).length;
      return {
        score: round(mine.length ? (100 * solved) / mine.length : 0),
        solved,
        problems: mine.length,
        tests_passed: mine.reduce((sum, r) => sum + r.passed, 0),
        tests: mine.reduce((sum, r) => sum + r.total, 0),
      };
    };
    return { public: metrics('public'), private: metrics('private') };
  },
};
