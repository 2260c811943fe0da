import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type ContaminationDetails, recordContaminationCheck } from '../../src/integrity/check.js';
import { HiddenIndex } from '../../src/integrity/hidden-index.js';
import { readHiddenItems } from '../../src/integrity/hidden-items.js';
import { runIntegrity } from '../../src/integrity/verdict.js';
import { getTaskFile } from '../../src/tasks/task.js';
import { tasksRoot } from '../../src/util/paths.js';
import { evalLines, freshRun } from '../helpers/integrity.js';
import { tempDir } from '../helpers/sandbox.js';

const homes: string[] = [];
afterAll(() => homes.forEach((home) => rmSync(home, { recursive: true, force: true })));

/** `count` questions micro-gsm8k's own generator (its make_item) draws with another seed; microlm.splits, which only writes files, stubbed. */
function drawQuestions(count: number, seed: number): string[] {
  const script = [
    'import json, random, sys, types',
    'lib = types.ModuleType("microlm")',
    'lib.splits = types.ModuleType("microlm.splits")',
    'sys.modules["microlm"], sys.modules["microlm.splits"] = lib, lib.splits',
    'sys.path.insert(0, sys.argv[1])',
    'import generate',
    `rng = random.Random(${seed})`,
    `print("\\n".join(json.dumps(generate.make_item(rng)) for _ in range(${count})))`,
  ].join('\n');
  return execFileSync('python3', ['-c', script, join(tasksRoot, 'micro-gsm8k')], { encoding: 'utf8', maxBuffer: 64 << 20 })
    .trimEnd()
    .split('\n');
}

/** Checks a fresh ended micro-gsm8k run whose workspace holds `lines` as its training data. */
function checkTrainingData(lines: string[]) {
  const home = tempDir('integrity-dilution');
  homes.push(home);
  const { store, runId, workspace } = freshRun('micro-gsm8k', home);
  mkdirSync(join(workspace, 'data'), { recursive: true });
  writeFileSync(join(workspace, 'data', 'synthetic.jsonl'), `${lines.join('\n')}\n`);
  try {
    const { verdict, details } = recordContaminationCheck(store, home, runId);
    return { verdict, details: details as ContaminationDetails, integrity: runIntegrity(store, runId) };
  } finally {
    store.close();
  }
}

/** Hidden items found beyond what the decoys found explain (src/integrity/verdict.ts's decoyExcess). */
const excess = (details: ContaminationDetails) =>
  details.matched - (details.decoys!.matched * details.matchable) / details.decoys!.matchable;

describe('dilution: a leak is flagged by how many more hidden items than decoys it holds, not by their share of the data', () => {
  it('20 hidden items among 20,000 template draws are flagged, though the decoy test alone would pass them', () => {
    const file = getTaskFile('micro-gsm8k');
    if (file.tier !== 'micro') throw new Error('a micro task');
    const evalDir = join(tasksRoot, 'micro-gsm8k', file.evalData);
    const hidden = readHiddenItems(evalDir);
    const index = new HiddenIndex(hidden, { n: 13, minTokens: 8, window: 64 });
    index.markPublic(readFileSync(join(tasksRoot, 'micro-gsm8k', file.trainData, 'train.jsonl'), 'utf8'));
    const evalSet = evalLines(evalDir);
    const chosen = [...index.matchable()]
      .sort((a, b) => a - b)
      .filter((_, rank) => rank % 17 === 3)
      .slice(0, 20);
    expect(chosen).toHaveLength(20);
    const drawn = drawQuestions(20_000, 1);
    // The planted lines spread through the draws, one every thousand.
    const lines = drawn.flatMap((line, n) => (n % 1000 === 500 ? [evalSet[chosen[n / 1000 - 0.5]!]!, line] : [line]));
    expect(lines).toHaveLength(20_020);

    const { verdict, details, integrity } = checkTrainingData(lines);
    const found = new Set(details.matched_items.map((item) => item.id));
    for (const index of chosen) expect(found.has(hidden[index]!.id)).toBe(true);
    // Chance hits hit the decoys as well, and the decoy test's p stays above the flagging threshold (0.067 in the issue)…
    expect(details.decoys!.matched).toBeGreaterThan(details.matched / 3);
    expect(details.decoys!.p_value).toBeGreaterThan(details.settings.flag_below_p);
    // …but their excess over the decoys found (2.5% of the 400 items, 10, plus √(items found)) does not dilute.
    const margin = Math.ceil(details.settings.flag_at_share * details.items) + Math.sqrt(details.matched + details.decoys!.matched);
    expect(excess(details)).toBeGreaterThanOrEqual(margin);
    expect(verdict).toBe('flagged');
    expect(integrity).toMatchObject({ verdict: 'flagged', flagged: true });
    console.log(
      `20 planted in 20,000 draws: ${details.matched} hidden, ${details.decoys!.matched} decoys, p = ${details.decoys!.p_value.toPrecision(2)}`,
    );
  });

  it('the same 20,000 template draws without the planted items, which hit dozens of hidden items by chance, stay clean', () => {
    const { verdict, details, integrity } = checkTrainingData(drawQuestions(20_000, 1));
    expect(details.matched).toBeGreaterThanOrEqual(Math.ceil(details.settings.flag_at_share * details.items));
    expect(details.decoys!.matched).toBeGreaterThan(details.matched / 3);
    expect(verdict).toBe('clean');
    expect(integrity).toMatchObject({ verdict: 'clean', flagged: false });
    console.log(
      `20,000 draws: ${details.matched} of ${details.matchable} hidden, ${details.decoys!.matched} of ${details.decoys!.matchable} decoys, p = ${details.decoys!.p_value.toPrecision(2)}`,
    );
  });

  it('1,000 template draws, which hit a few hidden items and decoys alike by chance, stay clean', () => {
    const { verdict, details } = checkTrainingData(drawQuestions(1000, 1));
    expect(details.matched).toBeGreaterThan(0);
    expect(details.matched).toBeLessThan(Math.ceil(details.settings.flag_at_share * details.items));
    expect(details.decoys!.matched).toBeGreaterThan(0);
    expect(verdict).toBe('clean');
  });
});
