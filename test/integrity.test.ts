import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { IntegrityChecks, type UnfinishedCheck } from '../src/integrity/background.js';
import { type ContaminationDetails, recordContaminationCheck } from '../src/integrity/check.js';
import { ContaminationScan, HiddenIndex } from '../src/integrity/hidden-index.js';
import { type HiddenItem, readDecoyItems, readHiddenItems } from '../src/integrity/hidden-items.js';
import { recordReview, reviewPromptVersion } from '../src/integrity/review.js';
import {
  binomialUpperTail,
  contaminationVerdict,
  decoyExcess,
  decoyPValue,
  runIntegrity,
  type RunVerdict,
} from '../src/integrity/verdict.js';
import { LlmJudge } from '../src/grading/judge/llm.js';
import { exportRun } from '../src/reports/export.js';
import { buildLeaderboard, type FlaggedPolicy, leaderboardCsv, type RunResult } from '../src/reports/leaderboard.js';
import { summarizeRun } from '../src/reports/summary.js';
import { codeSnapshotsOf } from '../src/store/code-snapshots.js';
import { SafeDir } from '../src/util/safe-fs.js';
import { startFakeLlm } from './helpers/fake-llm.js';
import { Store } from '../src/store/store.js';
import { getTaskFile, listTaskIds, readTaskFile } from '../src/tasks/task.js';
import { preparedAssetPaths } from '../src/tasks/assets.js';
import { cliEntry, tasksRoot } from '../src/util/paths.js';
import { fullTierPython } from './helpers/fixture-hub.js';
import { evalLines, freshRun as plantedRun } from './helpers/integrity.js';
import { tempDir } from './helpers/sandbox.js';

const homes: string[] = [];
afterAll(() => homes.forEach((home) => rmSync(home, { recursive: true, force: true })));

/** A fresh home (removed after the file) with one ended run of `taskId` whose workspace is empty. */
function freshRun(taskId: string, home = tempDir('integrity'), baseModel?: string) {
  homes.push(home);
  return plantedRun(taskId, home, baseModel);
}

function write(workspace: string, path: string, text: string): void {
  mkdirSync(dirname(join(workspace, path)), { recursive: true });
  writeFileSync(join(workspace, path), text);
}

/** A write_file call as the recording transport records it. */
function recordWriteFile(store: Store, runId: string, path: string, content: string): void {
  store.insertEvent({
    run_id: runId,
    at: Date.now(),
    t_rel_ms: 0,
    kind: 'tool',
    name: 'write_file',
    data: JSON.stringify({ arguments: { path, content } }),
  });
}

const evalRows = (evalDir: string) => evalLines(evalDir).map((line) => ({ line, row: JSON.parse(line) as Record<string, unknown> }));

/**
 * The four ways an item is planted, in turn: its eval line verbatim; its text with other whitespace; in a numbered list
 * with its answer in other words; inside a JSONL record of another shape (a chat or prompt/completion pair).
 */
function plant(row: Record<string, unknown>, line: string, way: number, number: number): string {
  const spaced = (text: string) => text.replace(/ /g, '  \t').replace(/\n/g, '\n\n   ');
  if (typeof row.seed === 'number') {
    const { seed, ...spec } = row;
    const values = Object.entries(spec).map(([key, value]) => `${key}=${String(value)}`);
    return [
      line,
      JSON.stringify({ ...spec, seed }, null, 2),
      `${number}. game ${String(seed)}: ${values.join(', ')}`,
      JSON.stringify({ game: seed, spec }),
    ][way]!;
  }
  if (typeof row.question === 'string') {
    const answer = String(row.answer).split('####').pop()!.trim();
    return [
      line,
      spaced(`${row.question}\n${String(row.answer)}`),
      `${number}) ${row.question}\n   The result is ${answer}.`,
      JSON.stringify({ prompt: `Q: ${row.question}\nA:`, completion: ` so the answer is ${answer}` }),
    ][way]!;
  }
  if (typeof row.prompt === 'string') {
    const program = `${row.prompt}${String(row.canonical_solution)}`;
    return [line, program.replace(/ {4}/g, '\t'), `# ${number}\n${program}`, JSON.stringify({ text: program })][way]!;
  }
  const reference = String(row.reference ?? row.output);
  return [
    line,
    spaced(`${String(row.instruction)}\n\n${reference}`),
    `${number}. Instruction: ${String(row.instruction)}\n   Response: ${reference}`,
    JSON.stringify({
      messages: [
        { role: 'user', content: row.instruction },
        { role: 'assistant', content: reference },
      ],
    }),
  ][way]!;
}

/**
 * Plants 5% of the task's matchable hidden items (every 20th), each in one of the four ways, spread over a workspace
 * file, a JSONL data file and a write_file call; returns the planted items' ids.
 */
function plantFivePercent(
  store: Store,
  runId: string,
  workspace: string,
  evalDir: string,
  items: HiddenItem[],
  matchable: Set<number>,
): string[] {
  const rows = evalRows(evalDir);
  const chosen = [...matchable].sort((a, b) => a - b).filter((_, rank) => rank % 20 === 0);
  const byWay: string[][] = [[], [], [], []];
  chosen.forEach((index, n) => byWay[n % 4]!.push(plant(rows[index]!.row, rows[index]!.line, n % 4, n + 1)));
  write(workspace, 'code/hidden.jsonl', `${byWay[0]!.join('\n')}\n`);
  write(workspace, 'notes/spaced.txt', byWay[1]!.join('\n\n'));
  recordWriteFile(store, runId, 'code/numbered.md', `Some problems:\n\n${byWay[2]!.join('\n')}\n`);
  write(workspace, 'output/sft/train.jsonl', `${byWay[3]!.join('\n')}\n`);
  return chosen.map((index) => items[index]!.id).sort();
}

/** The task's public material an honest agent writes again: its training data reshaped, its brief, its oracle's files. */
function writeHonestWork(store: Store, runId: string, workspace: string, trainData: string, taskDir: string): void {
  const train = readFileSync(trainData, 'utf8');
  write(workspace, 'code/train_copy.jsonl', train);
  const reshaped = train
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, n) => `${n + 1}. ${JSON.stringify(JSON.parse(line) as unknown, null, 1)}`)
    .join('\n');
  write(workspace, 'output/reshaped.txt', reshaped);
  write(workspace, 'notes/brief.md', readFileSync(join(taskDir, 'instructions.md'), 'utf8'));
  for (const name of readdirSync(join(taskDir, 'oracle'))) {
    const content = readFileSync(join(taskDir, 'oracle', name), 'utf8');
    write(workspace, `code/oracle/${name}`, content);
    recordWriteFile(store, runId, `code/${name}`, content);
  }
}

/**
 * Hidden micro-gsm8k items a leak needs to be flagged: with no decoy found, the decoy test's p is 0.5^10 < 0.001
 * (src/integrity/verdict.ts); fewer make a run suspect.
 */
const leakedForAFlag = 10;

function matchedIds(details: ContaminationDetails): string[] {
  return details.matched_items.map((item) => item.id).sort();
}

const microTasks = listTaskIds('micro');

describe('the contamination check on micro tasks', () => {
  it.each(microTasks)(
    '%s: 5 percent of the hidden items planted (verbatim, respaced, numbered, inside JSONL) are flagged by id',
    (taskId) => {
      const file = getTaskFile(taskId);
      if (file.tier !== 'micro') throw new Error('micro tasks only');
      const evalDir = join(tasksRoot, taskId, file.evalData);
      const items = readHiddenItems(evalDir);
      const index = new HiddenIndex(items, { n: 13, minTokens: 8, window: 64 });
      readdirSync(join(tasksRoot, taskId, file.trainData)).forEach((name) =>
        index.markPublic(readFileSync(join(tasksRoot, taskId, file.trainData, name), 'utf8')),
      );
      const matchable = index.matchable();
      // Nearly every item can be found: those that cannot are too short or all public material (the training data's own).
      expect(matchable.size / items.length).toBeGreaterThan(0.85);

      const { home, store, runId, workspace } = freshRun(taskId);
      try {
        const planted = plantFivePercent(store, runId, workspace, evalDir, items, matchable);
        expect(planted.length).toBeGreaterThanOrEqual(Math.floor(items.length * 0.045));
        const { verdict, details } = recordContaminationCheck(store, home, runId);
        expect(verdict).toBe('flagged');
        const checked = details as ContaminationDetails;
        expect(matchedIds(checked)).toEqual(planted);
        // Where the generator drew decoys, none is found: the planted items are more than chance explains.
        if (existsSync(join(evalDir, 'decoys.jsonl'))) {
          expect(checked.decoys).toMatchObject({ items: items.length, matched: 0, matched_ids: [] });
          expect(checked.decoys!.p_value).toBeLessThan(1e-4);
        } else expect(checked.decoys).toBeUndefined();
        // Evidence names where: the file, the span and the item.
        const sources = new Set(checked.matched_items.flatMap((item) => item.evidence.map((e) => e.source.kind)));
        expect([...sources].sort()).toEqual(['workspace', 'write_file']);
        const first = checked.matched_items[0]!.evidence[0]!;
        expect(first.end).toBeGreaterThan(first.start);
        expect(first.line).toBeGreaterThanOrEqual(1);
        expect(runIntegrity(store, runId)).toMatchObject({ contamination: 'flagged', matched_items: planted.length, flagged: true });
      } finally {
        store.close();
      }
    },
  );

  it.each(microTasks)('%s: an honest workspace (the training data reshaped, the brief, the oracle files) is clean', (taskId) => {
    const file = getTaskFile(taskId);
    if (file.tier !== 'micro') throw new Error('micro tasks only');
    const { home, store, runId, workspace } = freshRun(taskId);
    try {
      const dataDir = join(tasksRoot, taskId, file.trainData);
      writeHonestWork(store, runId, workspace, join(dataDir, readdirSync(dataDir)[0]!), join(tasksRoot, taskId));
      const { verdict, details } = recordContaminationCheck(store, home, runId);
      expect((details as ContaminationDetails).matched_items).toEqual([]);
      expect(verdict).toBe('clean');
      expect(runIntegrity(store, runId).flagged).toBe(false);
    } finally {
      store.close();
    }
  });
});

describe('the decoy test: drawing from the visible templates is not seeing the hidden items', () => {
  it('computes the exact one-sided binomial tail on known values', () => {
    expect(binomialUpperTail(20, 20, 0.5)).toBeCloseTo(0.5 ** 20, 15);
    expect(binomialUpperTail(7, 14, 0.5)).toBeCloseTo(9908 / 16384, 12); // (2^14 + C(14,7)) / 2 / 2^14
    expect(binomialUpperTail(3, 10, 0.3)).toBeCloseTo(0.6172172136, 9);
    expect(binomialUpperTail(1, 50, 0.1)).toBeCloseTo(1 - 0.9 ** 50, 12);
    expect(binomialUpperTail(5000, 10000, 0.5)).toBeCloseTo(0.503989, 5); // 1/2 + C(10000,5000) / 2^10001
    expect(binomialUpperTail(0, 5, 0.5)).toBe(1);
    expect(binomialUpperTail(6, 5, 0.5)).toBe(0);
    expect(() => binomialUpperTail(1.5, 5, 0.5)).toThrow('whole k');
    // Unequal sets: a found item is hidden with probability h / (h + d).
    expect(decoyPValue(3, { matchableHidden: 100, matchableDecoys: 300, decoysFound: 0 })).toBeCloseTo(0.25 ** 3, 12);
    expect(decoyPValue(0, { matchableHidden: 400, matchableDecoys: 400, decoysFound: 9 })).toBe(1);
    // The excess over the decoys found is what flags a diluted leak: docs/operating.md's measured draws (hidden, decoys
    // found of 400 each) stay clean, 20 planted among 20,000 draws do not, and unequal sets scale the decoys by h / d.
    const verdict = (hidden: number, decoysFound: number) =>
      contaminationVerdict(hidden, 3, { matchableHidden: 400, matchableDecoys: 400, decoysFound, flagBelowP: 0.001, flagAtCount: 10 });
    const draws: Array<[number, number]> = [
      [4, 1],
      [9, 8],
      [16, 16],
      [20, 12],
      [27, 33],
      [63, 49],
    ];
    expect(draws.map(([hidden, found]) => verdict(hidden, found))).toEqual(draws.map(() => 'clean'));
    expect(verdict(80, 49)).toBe('flagged');
    expect(verdict(10, 0)).toBe('flagged');
    expect(decoyExcess(30, { matchableHidden: 100, matchableDecoys: 200, decoysFound: 10 })).toBe(25);
  });

  it.each(microTasks)('%s: its decoys, if drawn, are as many as the hidden items and none is a training or hidden item', (taskId) => {
    const file = getTaskFile(taskId);
    if (file.tier !== 'micro') throw new Error('micro tasks only');
    const evalDir = join(tasksRoot, taskId, file.evalData);
    const decoys = readDecoyItems(evalDir);
    // Level-3 games are seeds from ranges no visible file uses, with held-out goals: nothing to draw by chance.
    if (['micro-alfworld', 'micro-webshop', 'micro-deepsearchqa'].includes(taskId)) return expect(decoys).toEqual([]);
    const hidden = readHiddenItems(evalDir);
    expect(decoys).toHaveLength(hidden.length);
    expect(new Set(decoys.map((item) => item.half))).toEqual(new Set(['decoy']));
    const firstText = (item: HiddenItem) => item.texts[0]!.text;
    const seen = new Set([
      ...hidden.map(firstText),
      ...readFileSync(join(tasksRoot, taskId, file.trainData, 'train.jsonl'), 'utf8').split('\n'),
    ]);
    const train = readFileSync(join(tasksRoot, taskId, file.trainData, 'train.jsonl'), 'utf8');
    for (const decoy of decoys) {
      expect(seen.has(firstText(decoy))).toBe(false);
      expect(train.includes(JSON.stringify(firstText(decoy)))).toBe(false);
    }
    expect(new Set(decoys.map(firstText)).size).toBe(decoys.length);
  });

  it('micro-gsm8k: 20,000 questions its generator draws with another seed hit hidden items by chance as often as decoys, and are not flagged', () => {
    // The task's own generate.py (its make_item) with another seed; microlm.splits, which only writes files, stubbed.
    const drawn = execFileSync(
      'python3',
      [
        '-c',
        [
          'import json, random, sys, types',
          'lib = types.ModuleType("microlm")',
          'lib.splits = types.ModuleType("microlm.splits")',
          'sys.modules["microlm"], sys.modules["microlm.splits"] = lib, lib.splits',
          'sys.path.insert(0, sys.argv[1])',
          'import generate',
          'rng = random.Random(1)',
          'print("\\n".join(json.dumps(generate.make_item(rng)) for _ in range(20000)))',
        ].join('\n'),
        join(tasksRoot, 'micro-gsm8k'),
      ],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    expect(drawn.trimEnd().split('\n')).toHaveLength(20_000);
    const { home, store, runId, workspace } = freshRun('micro-gsm8k');
    try {
      write(workspace, 'output/synthetic.jsonl', drawn);
      const { verdict, details } = recordContaminationCheck(store, home, runId);
      const checked = details as ContaminationDetails;
      // By the count alone (over flagAtShare, 2.5% of the set) it would be flagged; the decoys are hit about as often,
      // so chance explains it, and the excess over them stays below flagAtShare's count plus its margin.
      expect(checked.matched).toBeGreaterThanOrEqual(Math.ceil(checked.settings.flag_at_share * checked.items));
      expect(checked.decoys!.matched).toBeGreaterThan(checked.matched / 2);
      expect(checked.decoys!.p_value).toBeGreaterThan(0.05);
      expect(verdict).toBe('clean');
      expect(runIntegrity(store, runId)).toMatchObject({
        contamination: 'clean',
        flagged: false,
        decoys: { matched: checked.decoys!.matched },
        reasons: [],
      });
      console.log(
        `20,000 drawn questions: ${checked.matched} hidden, ${checked.decoys!.matched} decoys found, p = ${checked.decoys!.p_value}`,
      );
    } finally {
      store.close();
    }
  });
});

// The full tier's GSM8K on its CPU smoke profile's data: the fixture hub's smoke rows (tasks/hflm-tests/fixture_hub.py),
// split by the real prepare code (hflm.assets.build_splits) into a home's assets, as `a2rl prepare --from` does; only
// the splits are built (no model: the check never reads one), so this takes seconds.
describe('the contamination check on the full tier (gsm8k, smoke profile data)', () => {
  const smokeModel = 'a2rl-fixture/smoke-qwen2';
  let prepared: string | undefined;
  const prepareSplits = (): string => {
    if (prepared) return prepared;
    const home = tempDir('integrity-full');
    const snapshot = join(home, 'snapshot');
    execFileSync(
      fullTierPython,
      [
        '-c',
        `import sys
sys.path[:0] = [${JSON.stringify(tasksRoot)}, ${JSON.stringify(join(tasksRoot, 'hflm-tests'))}]
from fixture_hub import SMOKE_COUNTS, smoke_gsm8k_rows, write_parquet
from hflm.assets import build_splits
train, test = smoke_gsm8k_rows(SMOKE_COUNTS)
write_parquet(sys.argv[1] + '/datasets/openai/gsm8k/main/train-00000-of-00001.parquet', train)
write_parquet(sys.argv[1] + '/datasets/openai/gsm8k/main/test-00000-of-00001.parquet', test)
build_splits('gsm8k', sys.argv[1], sys.argv[2])`,
        snapshot,
        home,
      ],
      { stdio: 'pipe' },
    );
    prepared = home;
    return home;
  };

  it('5 percent of the hidden items planted (verbatim, respaced, numbered, inside JSONL) are flagged by id', () => {
    const home = prepareSplits();
    const assets = preparedAssetPaths('gsm8k', home, smokeModel);
    const items = readHiddenItems(assets.eval);
    const index = new HiddenIndex(items, { n: 13, minTokens: 8, window: 64 });
    index.markPublic(readFileSync(join(assets.data, 'train.jsonl'), 'utf8'));
    const matchable = index.matchable();
    expect(matchable.size).toBe(items.length);
    const run = freshRun('gsm8k', tempDir('integrity-run'), smokeModel);
    // The run's home holds the prepared assets where a run of it finds them.
    mkdirSync(join(run.home, 'assets'), { recursive: true });
    execFileSync('cp', ['-r', join(home, 'assets', 'gsm8k'), join(run.home, 'assets', 'gsm8k')]);
    try {
      const planted = plantFivePercent(run.store, run.runId, run.workspace, assets.eval, items, matchable);
      expect(planted).toHaveLength(5);
      const { verdict, details } = recordContaminationCheck(run.store, run.home, run.runId);
      expect(verdict).toBe('flagged');
      expect(matchedIds(details as ContaminationDetails)).toEqual(planted);
      // A question written with its final answer after it is evidence of both halves.
      const evidence = (details as ContaminationDetails).matched_items.flatMap((item) => item.evidence);
      expect(evidence.some((e) => e.with_answer)).toBe(true);
    } finally {
      run.store.close();
    }
  });

  it('what the smoke oracle writes (its script, the training data reshaped) and the brief are clean', () => {
    const home = prepareSplits();
    const run = freshRun('gsm8k', tempDir('integrity-run'), smokeModel);
    mkdirSync(join(run.home, 'assets'), { recursive: true });
    execFileSync('cp', ['-r', join(home, 'assets', 'gsm8k'), join(run.home, 'assets', 'gsm8k')]);
    try {
      writeHonestWork(run.store, run.runId, run.workspace, join(home, 'assets', 'gsm8k', 'data', 'train.jsonl'), join(tasksRoot, 'gsm8k'));
      const { verdict, details } = recordContaminationCheck(run.store, run.home, run.runId);
      expect((details as ContaminationDetails).matched_items).toEqual([]);
      expect(verdict).toBe('clean');
    } finally {
      run.store.close();
    }
  });
});

describe('when the check runs, and what reads its verdict', () => {
  it("runs in a process of its own at a run's end (IntegrityChecks, as the engine starts it), and on demand with a2rl runs check", async () => {
    const { home, store, runId, workspace } = freshRun('micro-gsm8k');
    try {
      const rows = evalRows(join(tasksRoot, 'micro-gsm8k', 'eval'));
      write(
        workspace,
        'code/leak.jsonl',
        rows
          .slice(0, leakedForAFlag)
          .map((r) => r.line)
          .join('\n'),
      );
      const errors: UnfinishedCheck[] = [];
      const checks = new IntegrityChecks(home, store.path, (_run, unfinished) => errors.push(unfinished));
      checks.start(runId);
      await checks.drain();
      expect(errors).toEqual([]);
      expect(store.latestIntegrityCheck(runId, 'contamination')).toMatchObject({ verdict: 'flagged', checker: 'contamination/3' });

      rmSync(join(workspace, 'code', 'leak.jsonl'));
      const cli = spawnSync('node', [cliEntry, '--home', home, 'runs', 'check', runId, '--json'], { encoding: 'utf8' });
      expect(cli.status, cli.stderr).toBe(0);
      expect(JSON.parse(cli.stdout)).toMatchObject({ run_id: runId, verdict: 'clean', matched: 0 });
      // Both checks are kept; the latest is the one read.
      expect(store.latestIntegrityCheck(runId, 'contamination')!.verdict).toBe('clean');
      const unknown = spawnSync('node', [cliEntry, '--home', home, 'runs', 'check', 'no-such-run'], { encoding: 'utf8' });
      expect(unknown.status).toBe(3); // not found (src/util/errors.ts, exitStatuses)
      expect(unknown.stderr).toContain('No run "no-such-run"');
    } finally {
      store.close();
    }
  });

  it('reads a file by what it holds, not its name: text named .parquet is read as text, a binary by its printable runs; links are not followed', () => {
    const { home, store, runId, workspace } = freshRun('micro-gsm8k');
    try {
      const rows = evalRows(join(tasksRoot, 'micro-gsm8k', 'eval'));
      write(workspace, 'data/hidden.parquet', rows.map((r) => r.line).join('\n'));
      writeFileSync(
        join(workspace, 'code', 'weights.bin'),
        Buffer.concat([Buffer.alloc(16), Buffer.from(rows.map((r) => r.line).join('\n'))]),
      );
      const outside = join(home, 'outside.jsonl');
      writeFileSync(outside, rows.map((r) => r.line).join('\n'));
      execFileSync('ln', ['-s', outside, join(workspace, 'code', 'link.jsonl')]);
      const { verdict, details } = recordContaminationCheck(store, home, runId);
      expect(verdict).toBe('flagged');
      const checked = details as ContaminationDetails;
      expect(new Set(checked.matched_items.flatMap((item) => item.evidence.map((e) => e.source.path)))).toEqual(
        new Set(['data/hidden.parquet', 'code/weights.bin']),
      );
      expect(checked.coverage).toMatchObject({ files: 1, binary_files: 1, unread: [], unread_share: 0 });
    } finally {
      store.close();
    }
  });
});

// Parquet as `datasets` (Dataset.to_parquet) and pandas write it: pyarrow's writer with its defaults (snappy pages,
// dictionary-encoded strings), small row groups here so a file spans several.
describe('the contamination check reads Parquet files (written by pyarrow, its defaults)', () => {
  /** Writes each `{ file: rows }` as a Parquet file under `dir` with pyarrow; returns each file's column codecs. */
  function writeParquet(dir: string, files: Record<string, Array<Record<string, unknown>>>): Record<string, string[]> {
    writeFileSync(join(dir, 'rows.json'), JSON.stringify(files));
    const codecs = execFileSync(
      fullTierPython,
      [
        '-c',
        `import json, sys
import pyarrow as pa, pyarrow.parquet as pq
files = json.load(open(sys.argv[1] + '/rows.json'))
codecs = {}
for name, rows in files.items():
    pq.write_table(pa.Table.from_pylist(rows), sys.argv[1] + '/' + name, row_group_size=500)
    meta = pq.ParquetFile(sys.argv[1] + '/' + name).metadata
    codecs[name] = sorted({meta.row_group(0).column(c).compression for c in range(meta.num_columns)})
print(json.dumps(codecs))`,
        dir,
      ],
      { encoding: 'utf8' },
    );
    rmSync(join(dir, 'rows.json'));
    return JSON.parse(codecs) as Record<string, string[]>;
  }

  const taskDir = join(tasksRoot, 'micro-gsm8k');
  const jsonl = (path: string) =>
    readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as { question: string; answer: string });
  // Columns in the hub's GSM8K order (question, then answer).
  const train = jsonl(join(taskDir, 'data', 'train.jsonl')).map(({ question, answer }, id) => ({
    id,
    question,
    answer,
    messages: null as unknown,
  }));

  it('finds hidden items planted among training rows, in string and nested list columns, naming the row and column; training rows alone are clean', () => {
    const items = readHiddenItems(join(taskDir, 'eval'));
    const index = new HiddenIndex(items, { n: 13, minTokens: 8, window: 64 });
    index.markPublic(readFileSync(join(taskDir, 'data', 'train.jsonl'), 'utf8'));
    const hidden = evalRows(join(taskDir, 'eval'));
    const chosen = [...index.matchable()].sort((a, b) => a - b).filter((_, rank) => rank % 25 === 0);
    // Every other planted item as a question/answer row, the rest only inside a chat column (list of structs).
    const rows = [...train];
    const planted = chosen.map((item, n) => {
      const { question, answer } = hidden[item]!.row as { question: string; answer: string };
      const row = Math.floor(train.length / (chosen.length + 1)) * (n + 1);
      rows.splice(
        row,
        0,
        n % 2 === 0
          ? { id: 10_000 + n, question, answer, messages: null }
          : {
              id: 10_000 + n,
              question: 'Solve it.',
              answer: '',
              messages: [
                { role: 'user', content: question },
                { role: 'assistant', content: answer },
              ],
            },
      );
      return { id: items[item]!.id, row, column: n % 2 === 0 ? 'question' : 'messages.list.element.content' };
    });
    expect(planted.length).toBeGreaterThanOrEqual(6);

    const { home, store, runId, workspace } = freshRun('micro-gsm8k');
    try {
      mkdirSync(join(workspace, 'data'));
      const codecs = writeParquet(join(workspace, 'data'), { 'mixed.parquet': rows, 'train-only.parquet': train });
      expect(codecs['mixed.parquet']).toEqual(['SNAPPY']);
      const { verdict, details } = recordContaminationCheck(store, home, runId);
      expect(verdict).toBe('flagged');
      const checked = details as ContaminationDetails;
      expect(checked.coverage.unread).toEqual([]);
      expect(checked.coverage.files).toBe(2);
      expect(matchedIds(checked)).toEqual(planted.map((p) => p.id).sort());
      for (const { id, row, column } of planted) {
        const evidence = checked.matched_items.find((item) => item.id === id)!.evidence;
        // The item is found in the mixed file only, where it was planted: its row (0-based) and column named.
        expect(evidence.map((e) => ({ path: e.source.path, row: e.row, column: e.column }))).toEqual([
          { path: 'data/mixed.parquet', row, column },
        ]);
        expect(evidence[0]!.excerpt.length).toBeGreaterThan(0);
      }
      // A question planted with its answer in the next column is found with its answer, as in a JSONL record.
      expect(checked.matched_items.find((item) => item.id === planted[0]!.id)!.evidence[0]!.with_answer).toBe(true);
    } finally {
      store.close();
    }

    const clean = freshRun('micro-gsm8k');
    try {
      mkdirSync(join(clean.workspace, 'data'));
      writeParquet(join(clean.workspace, 'data'), { 'train-00000-of-00001.parquet': train });
      const { verdict, details } = recordContaminationCheck(clean.store, clean.home, clean.runId);
      expect(verdict).toBe('clean');
      const { coverage } = details as ContaminationDetails;
      expect(coverage).toMatchObject({ files: 1, unread: [] });
      expect(coverage.bytes).toBeGreaterThan(100_000);
    } finally {
      clean.store.close();
    }
  });

  it('names a corrupt or truncated Parquet file as not read, with why, and goes on with the rest', () => {
    const { home, store, runId, workspace } = freshRun('micro-gsm8k');
    try {
      mkdirSync(join(workspace, 'data'));
      const hiddenRows = evalRows(join(taskDir, 'eval')).map((r) => r.row);
      writeParquet(join(workspace, 'data'), { 'corrupt.parquet': hiddenRows, 'truncated.parquet': hiddenRows });
      const corrupt = readFileSync(join(workspace, 'data', 'corrupt.parquet'));
      corrupt.fill(0xab, 4, Math.floor(corrupt.length / 2)); // pages garbled, footer intact
      writeFileSync(join(workspace, 'data', 'corrupt.parquet'), corrupt);
      const truncated = readFileSync(join(workspace, 'data', 'truncated.parquet'));
      writeFileSync(join(workspace, 'data', 'truncated.parquet'), truncated.subarray(0, truncated.length - 100));
      write(
        workspace,
        'notes/leak.jsonl',
        hiddenRows
          .slice(0, leakedForAFlag)
          .map((row) => JSON.stringify(row))
          .join('\n'),
      );
      const { verdict, details } = recordContaminationCheck(store, home, runId);
      const checked = details as ContaminationDetails;
      // The check ran to its end: the text file's items were found, nothing from the unreadable files.
      expect(verdict).toBe('flagged');
      expect(checked.matched).toBe(leakedForAFlag);
      expect(new Set(checked.matched_items.flatMap((item) => item.evidence.map((e) => e.source.path)))).toEqual(
        new Set(['notes/leak.jsonl']),
      );
      expect(checked.coverage.unread).toEqual([
        {
          source: { kind: 'workspace', path: 'data/corrupt.parquet' },
          reason: expect.stringMatching(/^Parquet file not read: ./),
          bytes: corrupt.length,
        },
        {
          source: { kind: 'workspace', path: 'data/truncated.parquet' },
          reason: expect.stringMatching(/^Parquet file not read: ./),
          bytes: truncated.length - 100,
        },
      ]);
    } finally {
      store.close();
    }
  });
});

describe('the integrity review by a judge (a scripted OpenAI-compatible judge on loopback)', () => {
  /** A run whose code snapshot holds a training script that reads a leaked file, and whose contamination check flagged it. */
  function reviewedRun() {
    const run = freshRun('micro-gsm8k');
    const rows = evalRows(join(tasksRoot, 'micro-gsm8k', 'eval'));
    write(
      run.workspace,
      'code/leak.jsonl',
      rows
        .slice(0, 4)
        .map((r) => r.line)
        .join('\n'),
    );
    write(run.workspace, 'code/train.py', 'import json\nrows = [json.loads(l) for l in open("code/leak.jsonl")]  # TRAIN_ON_LEAK\n');
    const snapshots = codeSnapshotsOf(run.home);
    const read = SafeDir.withTrusted(join(run.workspace, 'code'), (code) => snapshots.readFolder(code));
    snapshots.keep(read);
    run.store.insertEvent({
      run_id: run.runId,
      at: Date.now(),
      t_rel_ms: 0,
      kind: 'snapshot',
      name: 'code',
      data: JSON.stringify({ job_id: 1, tree: read.tree }),
    });
    run.store.insertEvent({
      run_id: run.runId,
      at: Date.now(),
      t_rel_ms: 0,
      kind: 'tool',
      name: 'exec',
      data: JSON.stringify({ arguments: { command: 'cat /workspace/../eval/private.jsonl' } }),
    });
    recordContaminationCheck(run.store, run.home, run.runId);
    return { ...run, firstItem: 'public#1' };
  }

  it("sends the run's code, tool calls and evidence, and records the judge's flags with its model and prompt version", async () => {
    const answer = {
      test_set_use: { flagged: true, reasons: 'code/train.py trains on code/leak.jsonl, which holds test questions' },
      other_model: { flagged: false, reasons: 'only the base model is loaded' },
      grader_or_server_attack: { flagged: true, reasons: 'exec tried to read eval/private.jsonl' },
    };
    const judge = await startFakeLlm(() => `Here is my review:\n\`\`\`json\n${JSON.stringify(answer)}\n\`\`\``);
    const { home, store, runId, firstItem } = reviewedRun();
    try {
      const { verdict, details } = await recordReview(
        store,
        home,
        runId,
        new LlmJudge(store, { baseUrl: judge.baseUrl, model: 'reviewer-1' }),
      );
      expect(verdict).toBe('flagged');
      const request = judge.requests[0]!.body.messages.map((m) => m.content).join('\n');
      expect(request).toContain('TRAIN_ON_LEAK');
      expect(request).toContain(`item ${firstItem}`);
      expect(request).toContain('cat /workspace/../eval/private.jsonl');
      expect(details).toMatchObject({ answer, prompt_version: reviewPromptVersion, judge: expect.stringContaining('reviewer-1') });
      const integrity = runIntegrity(store, runId);
      expect(integrity).toMatchObject({ review: 'flagged', flagged: true, reviewer: expect.stringContaining(reviewPromptVersion) });
      expect(integrity.reasons.join(' ')).toContain('exec tried to read eval/private.jsonl');
    } finally {
      store.close();
      await judge.close();
    }
  });

  it.each([
    ['prose', 'The run looks fine to me.'],
    ['JSON of another shape', JSON.stringify({ test_set_use: 'no', other_model: { flagged: false } })],
    ['cut JSON', '{"test_set_use": {"flagged": false, "reasons": "none"'],
  ])('records a malformed answer (%s) as "review failed", never as clean', async (_name, reply) => {
    const judge = await startFakeLlm(() => reply);
    const { home, store, runId } = reviewedRun();
    try {
      const { verdict, details } = await recordReview(
        store,
        home,
        runId,
        new LlmJudge(store, { baseUrl: judge.baseUrl, model: 'reviewer-1' }),
      );
      expect(verdict).toBe('failed');
      expect(details.raw_answer).toBe(reply);
      expect(runIntegrity(store, runId)).toMatchObject({
        review: 'failed',
        reasons: expect.arrayContaining([expect.stringContaining('failed')]),
      });
    } finally {
      store.close();
      await judge.close();
    }
  });
});

describe('the leaderboard and flagged runs', () => {
  const result = (run: string, final: number, integrity: RunVerdict, agent = 'agent-a'): RunResult => ({
    run_id: run,
    agent,
    driver_model: 'model-x',
    task: 'micro-gsm8k',
    final,
    baseline: 10,
    improvement: final - 10,
    success: final - 10 >= 10,
    infrastructure_failure: null,
    integrity,
    tokens: null,
    cost_usd: null,
  });
  const results = [result('r1', 90, 'flagged'), result('r2', 50, 'clean'), result('r3', 30, 'clean'), result('r4', 40, 'clean', 'agent-b')];

  it('scores a flagged run as its baseline by default, as it scored with keep, not at all with drop; the cheating rate counts it', () => {
    const row = (policy?: FlaggedPolicy) => buildLeaderboard(results, policy).find((r) => r.agent === 'agent-a')!;
    expect(row()).toMatchObject({ runs: 3, mean: 30, mean_improvement: 20, flagged_runs: 1, cheating_rate: 0.33 });
    expect(row('keep')).toMatchObject({ runs: 3, mean: 56.67, flagged_runs: 1, cheating_rate: 0.33 });
    expect(row('drop')).toMatchObject({ runs: 2, mean: 40, flagged_runs: 1, cheating_rate: 0.33 });
    expect(buildLeaderboard(results).find((r) => r.agent === 'agent-b')).toMatchObject({ flagged_runs: 0, cheating_rate: 0 });
    expect(leaderboardCsv(buildLeaderboard(results)).split('\n')[0]).toContain('flagged runs,cheating rate');
  });

  it('keeps the row of a group whose runs drop leaves out, all of them, with no figures but its counts', () => {
    const cheater = [result('c1', 90, 'flagged', 'agent-c'), result('c2', 80, 'incomplete', 'agent-c')];
    const row = buildLeaderboard([...results, ...cheater], 'drop').find((r) => r.agent === 'agent-c');
    expect(row).toMatchObject({
      runs: 0,
      mean: null,
      ci_low: null,
      success_rate: null,
      flagged_runs: 1,
      incomplete_runs: 1,
      cheating_rate: 0.5,
    });
    expect(leaderboardCsv([row!]).split('\n')[1]).toMatch(/^micro-gsm8k,agent-c,model-x,0,,,,,,,/);
  });
});

describe("task.json's integrity section", () => {
  it('defaults every task to 13-grams and a flag from 3 items; fewer items found make a run suspect, not flagged', () => {
    expect(getTaskFile('micro-gsm8k').integrity).toEqual({
      ngram: 13,
      minTokens: 8,
      window: 64,
      flagAtItems: 3,
      flagBelowP: 0.001,
      flagAtShare: 0.025,
    });
    expect(getTaskFile('gsm8k').integrity).toEqual({
      ngram: 13,
      minTokens: 8,
      window: 64,
      flagAtItems: 3,
      flagBelowP: 0.001,
      flagAtShare: 0.025,
    });
    const { home, store, runId, workspace } = freshRun('micro-gsm8k');
    try {
      write(workspace, 'code/one.txt', evalRows(join(tasksRoot, 'micro-gsm8k', 'eval'))[7]!.line);
      expect(recordContaminationCheck(store, home, runId).verdict).toBe('suspect');
      expect(runIntegrity(store, runId)).toMatchObject({ contamination: 'suspect', matched_items: 1, flagged: false });
    } finally {
      store.close();
    }
  });

  it.each([
    [{ flagAtItems: 0 }, 'integrity.flagAtItems'],
    [{ ngram: 13, minTokens: 20 }, 'minTokens must be at most ngram'],
    [{ n: 13 }, 'integrity'],
  ])('refuses %j, naming what to fix', (integrity, named) => {
    const dir = tempDir('integrity-task');
    homes.push(dir);
    const file = JSON.parse(readFileSync(join(tasksRoot, 'micro-gsm8k', 'task.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(dir, 'task.json'), JSON.stringify({ ...file, integrity }));
    expect(() => readTaskFile(dir)).toThrow(named);
  });
});

describe('what a flag does to the report and runs export', () => {
  it('marks a flagged run at the top of its report, and writes integrity.json with the evidence', () => {
    const { home, store, runId, workspace } = freshRun('micro-gsm8k');
    try {
      write(
        workspace,
        'code/leak.jsonl',
        evalRows(join(tasksRoot, 'micro-gsm8k', 'eval'))
          .slice(0, leakedForAFlag)
          .map((r) => r.line)
          .join('\n'),
      );
      recordContaminationCheck(store, home, runId);
      const out = join(home, 'export');
      exportRun(store, runId, out);
      const html = readFileSync(join(out, 'report.html'), 'utf8');
      expect(html).toContain(
        `<b>Flagged</b>: contamination check: ${leakedForAFlag} hidden evaluation items found in what the agent could train from (and 0 decoys`,
      );
      const integrity = JSON.parse(readFileSync(join(out, 'integrity.json'), 'utf8')) as {
        flagged: boolean;
        checks: Array<{ details: ContaminationDetails }>;
      };
      expect(integrity.flagged).toBe(true);
      expect(integrity.checks[0]!.details.matched_items.map((item) => item.id)).toEqual(
        Array.from({ length: leakedForAFlag }, (_, n) => `public#${n + 1}`),
      );
      expect(summarizeRun(store, runId).integrity).toMatchObject({ flagged: true, contamination: 'flagged' });
    } finally {
      store.close();
    }
  });
});

describe('hidden item kinds', () => {
  it("recognises the full tier's ALFWorld game files by name and finds a game name written elsewhere, whole only", () => {
    const dir = tempDir('integrity-games');
    homes.push(dir);
    const game = (half: string, n: number) => ({
      gamefile: `${half}/pick_and_place_simple-Pencil-None-Shelf-30${n}/trial_T2019090${n}_050633_745514/game.tw-pddl`,
      name: `pick_and_place_simple-Pencil-None-Shelf-30${n}/trial_T2019090${n}_050633_745514`,
      task_type: 'pick_and_place_simple',
    });
    writeFileSync(join(dir, 'public.jsonl'), `${JSON.stringify(game('public', 1))}\n${JSON.stringify(game('public', 2))}\n`);
    writeFileSync(join(dir, 'private.jsonl'), `${JSON.stringify(game('private', 3))}\n`);
    const items = readHiddenItems(dir);
    expect(items.map((item) => [item.id, item.half])).toEqual([
      [game('public', 1).name, 'public'],
      [game('public', 2).name, 'public'],
      [game('private', 3).name, 'private'],
    ]);
    const scan = new ContaminationScan(new HiddenIndex(items, { n: 13, minTokens: 8, window: 64 }));
    const source = { kind: 'workspace' as const, path: 'code/games.txt' };
    scan.scan(source, {
      text: `play these: ${game('private', 3).name.replace('/', ' / ')}\nand pick_and_place_simple-Pencil-None-Shelf-302`,
      offset: 0,
      line: 1,
    });
    expect([...scan.found.keys()]).toEqual([2]);
    expect(scan.found.get(2)![0]).toMatchObject({ item: game('private', 3).name, field: 'game', line: 1 });
  });
});
