import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../util/paths.js';
import { startProgress } from '../util/progress.js';
import type { Store } from '../store/store.js';
import { getTaskFile } from '../tasks/task.js';
import { formatUsd, type PriceTable, roundUsd } from '../transcripts/prices.js';
import { runUsage } from '../transcripts/run-usage.js';
import { type EnvironmentResult, keptResults, type RunResult } from './run-summaries.js';

export { isBenchmarkRun, type RunResult } from './run-summaries.js';

/**
 * Results over repeated runs, grouped by agent, driver model and task. A run's result is
 * its final score (docs/ARCHITECTURE.md, "Scores"): the private score of its best public submission, or the
 * baseline's when it has no graded submission (the model was left as it was).
 */

/**
 * How the leaderboard scores a run that is not clean (flagged, or its check incomplete): as it scored, as its baseline
 * (the default: no gain), or not at all: every figure of its row (runs, scores, CI, success, tokens, cost) then comes
 * from the runs left.
 */
export const flaggedPolicies = ['keep', 'baseline', 'drop'] as const;
export type FlaggedPolicy = (typeof flaggedPolicies)[number];

/** The policy in a sentence, for every page that shows the leaderboard. */
export function flaggedPolicyText(policy: FlaggedPolicy): string {
  const what = {
    baseline: 'scored as their baseline (no gain, no success)',
    keep: 'scored as they scored (shown, not corrected)',
    drop: 'left out: every figure of a row (runs, scores, CI, success, tokens, cost) is computed on the runs left',
  }[policy];
  return `Runs flagged by an integrity check, or whose check is incomplete (only a clean check is clean), are ${what} (--flagged ${policy}).`;
}

export interface LeaderboardRow {
  agent: string;
  driver_model: string;
  task: string;
  /** The environment its runs were graded in (src/grading/grader-version.ts); rows of one task never mix two. */
  environment?: string;
  /** Runs scored; 0 when every run of the group was left out (`--flagged drop`, infrastructure failures): the figures below are then null. */
  runs: number;
  mean: number | null;
  /** Sample standard deviation; null for a single run. */
  std: number | null;
  ci_low: number | null;
  ci_high: number | null;
  mean_improvement: number | null;
  baseline: number | null;
  success_rate: number | null;
  success_margin: number;
  /** Runs of this group whose infrastructure failed (the agent never had the tools, or exited abnormally): left out of the figures above. */
  infrastructure_failures: number;
  /** Runs of this group flagged by an integrity check, and their share of its runs (infrastructure failures aside): the cheating rate. */
  flagged_runs: number;
  /** Runs of this group whose contamination check did not finish, did not run or read too little: scored as flagged ones. */
  incomplete_runs: number;
  cheating_rate: number;
  /** Mean agent tokens and dollars over the group's runs whose transcript says (`tokens_runs`, `cost_runs` of `runs`); null when none does. */
  mean_tokens: number | null;
  tokens_runs: number;
  mean_cost_usd: number | null;
  cost_runs: number;
  /** Mean improvement per mean dollar over the runs with a cost; null without one, or when they cost nothing. */
  gain_per_dollar: number | null;
}

/**
 * Ended benchmark runs' results (of one task, or all), read from their kept summaries (src/reports/run-summaries.ts);
 * runs without a baseline grade yet are left out. `prices`: the operator's price table: each run's dollars are then
 * priced again from its transcript (a read per run; the kept figure is the agent's own or the built-in table's).
 */
export function runResults(store: Store, task?: string, prices?: PriceTable): EnvironmentResult[] {
  const results = keptResults(store, task);
  if (prices === undefined) return results;
  const progress = startProgress('pricing runs', results.length);
  try {
    return results.map((result) => {
      progress.tick(result.run_id);
      const usage = runUsage(store, result.run_id, prices);
      return { ...result, cost_usd: usage.cost_usd === 'unknown' ? null : usage.cost_usd };
    });
  } finally {
    progress.stop();
  }
}

/** A small seeded generator (mulberry32): the same runs always give the same interval. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Percentile bootstrap confidence interval of the mean. */
export function bootstrapCi(values: readonly number[], level = 0.95, resamples = 10_000, seed = 1): [number, number] {
  if (values.length === 0) throw new Error('no values to bootstrap');
  if (values.length === 1) return [values[0]!, values[0]!];
  const random = seededRandom(seed);
  const means = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let sum = 0;
    for (let i = 0; i < values.length; i++) sum += values[Math.floor(random() * values.length)]!;
    means[r] = sum / values.length;
  }
  means.sort();
  const at = (q: number) => means[Math.min(resamples - 1, Math.max(0, Math.floor(q * resamples)))]!;
  return [at((1 - level) / 2), at(1 - (1 - level) / 2)];
}

/**
 * Groups of up to this many runs get the percentile bootstrap; larger ones the normal interval of the mean (mean ±
 * 1.96 standard errors), which is as good there (the mean's sampling distribution is normal to within O(1/√n); the two
 * differed by under 0.01 points at 200 runs in test/scale.test.ts) and costs O(n) instead of 10,000 × n.
 */
export const bootstrapRunsAtMost = 200;

/** Intervals by the group's contents (its finals in order): the view's leaderboard recomputes only the groups that changed. */
const intervals = new Map<string, [number, number]>();
const maxKeptIntervals = 10_000;

/** The leaderboard's 95% confidence interval of a group's mean final score: bootstrap or normal (see {@link bootstrapRunsAtMost}), cached. */
export function meanInterval(values: readonly number[]): [number, number] {
  if (values.length > bootstrapRunsAtMost) {
    const half = (1.959964 * standardDeviation(values)!) / Math.sqrt(values.length);
    const m = mean(values);
    return [m - half, m + half];
  }
  const key = values.join(',');
  const known = intervals.get(key);
  if (known) return known;
  if (intervals.size >= maxKeptIntervals) intervals.clear();
  const interval = bootstrapCi(values);
  intervals.set(key, interval);
  return interval;
}

export function standardDeviation(values: readonly number[]): number | null {
  if (values.length < 2) return null;
  const m = mean(values);
  return Math.sqrt(values.reduce((sum, x) => sum + (x - m) ** 2, 0) / (values.length - 1));
}

const round = (x: number) => Math.round(x * 100) / 100;

/** A run that is not clean as the policy scores it: unchanged (keep), as its baseline with no gain (baseline), or left out (drop). */
function scoredAs(result: RunResult, policy: FlaggedPolicy): RunResult | undefined {
  if (result.integrity === 'clean' || policy === 'keep') return result;
  return policy === 'drop' ? undefined : { ...result, final: result.baseline, improvement: 0, success: false };
}

export function buildLeaderboard(results: readonly EnvironmentResult[], flagged: FlaggedPolicy = 'baseline'): LeaderboardRow[] {
  const groups = new Map<string, RunResult[]>();
  const failures = new Map<string, number>();
  const flaggedRuns = new Map<string, number>();
  const incompleteRuns = new Map<string, number>();
  const counted = new Map<string, number>();
  for (const result of results) {
    const key = JSON.stringify([result.task, result.agent, result.driver_model, result.environment ?? '']);
    // Every group keeps its row, its runs all left out or not: a group dropped whole still shows its flagged runs.
    if (!groups.has(key)) groups.set(key, []);
    if (result.infrastructure_failure !== null) {
      failures.set(key, (failures.get(key) ?? 0) + 1);
      continue;
    }
    counted.set(key, (counted.get(key) ?? 0) + 1);
    if (result.integrity === 'flagged') flaggedRuns.set(key, (flaggedRuns.get(key) ?? 0) + 1);
    if (result.integrity === 'incomplete') incompleteRuns.set(key, (incompleteRuns.get(key) ?? 0) + 1);
    const scored = scoredAs(result, flagged);
    if (scored) groups.get(key)!.push(scored);
  }
  const rows = [...groups.entries()].map(([key, group]): LeaderboardRow => {
    const [task, agent, driverModel, environment] = JSON.parse(key) as [string, string, string, string];
    const finals = group.map((r) => r.final);
    const scored = group.length > 0;
    const [low, high] = scored ? meanInterval(finals) : [null, null];
    const std = standardDeviation(finals);
    const tokens = group.flatMap((r) => (r.tokens === null ? [] : [r.tokens]));
    const costed = group.filter((r) => r.cost_usd !== null);
    const meanCost = costed.length ? mean(costed.map((r) => r.cost_usd!)) : null;
    const figure = (x: number | null) => (scored && x !== null ? round(x) : null);
    return {
      agent,
      driver_model: driverModel,
      task,
      ...(environment ? { environment } : {}),
      runs: group.length,
      mean: figure(mean(finals)),
      std: std === null ? null : round(std),
      ci_low: figure(low),
      ci_high: figure(high),
      mean_improvement: figure(mean(group.map((r) => r.improvement))),
      baseline: figure(mean(group.map((r) => r.baseline))),
      success_rate: figure(group.filter((r) => r.success).length / group.length),
      success_margin: getTaskFile(task).successMargin,
      infrastructure_failures: failures.get(key) ?? 0,
      flagged_runs: flaggedRuns.get(key) ?? 0,
      incomplete_runs: incompleteRuns.get(key) ?? 0,
      cheating_rate: counted.get(key) ? round((flaggedRuns.get(key) ?? 0) / counted.get(key)!) : 0,
      mean_tokens: tokens.length ? Math.round(mean(tokens)) : null,
      tokens_runs: tokens.length,
      mean_cost_usd: meanCost === null ? null : roundUsd(meanCost),
      cost_runs: costed.length,
      gain_per_dollar: meanCost ? round(mean(costed.map((r) => r.improvement)) / meanCost) : null,
    };
  });
  return rows.sort(
    (a, b) => a.task.localeCompare(b.task) || (b.mean ?? -Infinity) - (a.mean ?? -Infinity) || a.agent.localeCompare(b.agent),
  );
}

/** A leaderboard row with the runs behind it (the view links them; `leaderboard.json` lists them). */
export type LeaderboardEntry = LeaderboardRow & { run_ids: string[] };

/**
 * A kept leaderboard's request: what it was asked, and the code that ranked it (a kept board from another a2rl
 * version, which may score differently, is never read). Bump `rankingFormat` when a figure is computed differently.
 */
const rankingFormat = 2;
const packageVersion = (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;

type RankOptions = { task?: string; prices?: PriceTable; flagged?: FlaggedPolicy };

/** A ranked leaderboard: its rows, when it was ranked (ms), and the summaries_generation it ranked. */
export interface RankedBoard {
  rows: LeaderboardEntry[];
  ranked_at: number;
  generation: number;
}

const requestOf = (options: RankOptions) =>
  JSON.stringify([rankingFormat, packageVersion, options.task ?? null, options.flagged ?? 'baseline']);

/**
 * The newest leaderboard kept for this request, whatever has changed since (`generation` says when it was ranked):
 * what the view's page shows at once while it ranks again (stale-while-revalidate). Undefined before any was kept.
 */
export function keptBoard(store: Store, options: Omit<RankOptions, 'prices'> = {}): RankedBoard | undefined {
  const kept = store.db.prepare('SELECT generation, rows FROM leaderboards WHERE request = ?').get(requestOf(options)) as
    { generation: number; rows: string } | undefined;
  return kept && { ...(JSON.parse(kept.rows) as Omit<RankedBoard, 'generation'>), generation: kept.generation };
}

/**
 * The leaderboard of ended runs (of one task, or all), each row with its runs: read from the store when one was kept
 * since what it ranks last changed (summaries_generation: a run ended, was graded, checked or marked, a job of an
 * ended run ended, a grade came in), else ranked from the kept summaries and kept for the next reader, the view's page
 * or `a2rl leaderboard` alike: at 10⁵ runs a reader pays a ranking only after a change. A price table prices every run
 * again from its transcript: never kept.
 */
export function rankBoard(store: Store, options: RankOptions = {}): RankedBoard {
  const request = requestOf(options);
  const generation = store.summariesGeneration();
  if (options.prices === undefined) {
    const kept = store.keptLeaderboard(request, generation);
    if (kept !== undefined) return { ...(JSON.parse(kept) as Omit<RankedBoard, 'generation'>), generation };
  }
  const results = runResults(store, options.task, options.prices);
  const runIds = new Map<string, string[]>();
  for (const r of results) {
    if (r.infrastructure_failure !== null) continue;
    const key = JSON.stringify([r.task, r.agent, r.driver_model]);
    const ids = runIds.get(key);
    if (ids) ids.push(r.run_id);
    else runIds.set(key, [r.run_id]);
  }
  const rows = buildLeaderboard(results, options.flagged ?? 'baseline').map((row) => ({
    ...row,
    run_ids: runIds.get(JSON.stringify([row.task, row.agent, row.driver_model])) ?? [],
  }));
  const board = { rows, ranked_at: Date.now() };
  // Kept only if nothing it ranks changed while it was ranked (the store checks the generation as it writes).
  if (options.prices === undefined) store.keepLeaderboard(request, generation, JSON.stringify(board));
  return { ...board, generation };
}

/** {@link rankBoard}'s rows. */
export function rankRuns(store: Store, options: RankOptions = {}): LeaderboardEntry[] {
  return rankBoard(store, options).rows;
}

/** `a2rl leaderboard`'s rows: {@link rankRuns} without the runs behind each. */
export function leaderboardRows(store: Store, options: RankOptions = {}): LeaderboardRow[] {
  return rankRuns(store, options).map(({ run_ids: _runIds, ...row }) => row);
}

/** The leaderboard's columns, in order: a name and a row's cell as text ('' for none); the CSV, Markdown and the view's page show these. */
export const leaderboardColumns: Array<[string, (row: LeaderboardRow) => string]> = [
  ['task', (r) => (r.environment ? `${r.task} (${r.environment})` : r.task)],
  ['agent', (r) => r.agent],
  ['driver model', (r) => r.driver_model],
  ['runs', (r) => String(r.runs)],
  ['mean final score', (r) => fixed(r.mean)],
  ['std', (r) => fixed(r.std)],
  ['95% CI low', (r) => fixed(r.ci_low)],
  ['95% CI high', (r) => fixed(r.ci_high)],
  ['baseline', (r) => fixed(r.baseline)],
  ['mean improvement', (r) => fixed(r.mean_improvement)],
  ['success rate', (r) => fixed(r.success_rate)],
  ['success margin', (r) => String(r.success_margin)],
  ['infrastructure failures (not counted)', (r) => String(r.infrastructure_failures)],
  ['flagged runs', (r) => String(r.flagged_runs)],
  ['cheating rate', (r) => r.cheating_rate.toFixed(2)],
  ['incomplete checks', (r) => String(r.incomplete_runs)],
  ['mean agent tokens', (r) => costFigure(r.mean_tokens, r.tokens_runs, r.runs, (x) => String(x))],
  ['mean agent dollars', (r) => costFigure(r.mean_cost_usd, r.cost_runs, r.runs, formatUsd)],
  ['score gain per dollar', (r) => costFigure(r.gain_per_dollar, r.cost_runs, r.runs, (x) => x.toFixed(2))],
];

/** A figure to two decimals, '' where there is none (a single run's std, a group with no run scored). */
function fixed(x: number | null): string {
  return x === null ? '' : x.toFixed(2);
}

/** A cost figure: "unknown" when no run's transcript gave it, and how many runs it stands for when not all did. */
function costFigure(value: number | null, known: number, runs: number, format: (x: number) => string): string {
  if (value === null) return 'unknown';
  return known === runs ? format(value) : `${format(value)} (${known} of ${runs} runs)`;
}

export function leaderboardCsv(rows: readonly LeaderboardRow[]): string {
  const quote = (text: string) => (/[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text);
  return [leaderboardColumns.map(([name]) => name), ...rows.map((row) => leaderboardColumns.map(([, value]) => value(row)))]
    .map((cells) => cells.map(quote).join(','))
    .join('\n')
    .concat('\n');
}

export function leaderboardMarkdown(rows: readonly LeaderboardRow[], policy: FlaggedPolicy = 'baseline'): string {
  const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [
    '# a2rl-bench leaderboard',
    '',
    'Final score: the private score of each run’s best public submission (the baseline’s when it has none). ' +
      `CI: 95% percentile bootstrap of the mean over runs (the normal interval above ${bootstrapRunsAtMost} runs). Success: final score at least the task’s margin above the baseline. ` +
      'Agent tokens and dollars: from each run’s agent transcript, unknown where it does not say; gain per dollar: mean improvement over mean dollars.',
    '',
    flaggedPolicyText(policy),
    '',
    line(leaderboardColumns.map(([name]) => name)),
    line(leaderboardColumns.map(() => '---')),
    ...rows.map((row) => line(leaderboardColumns.map(([, value]) => value(row) || '–'))),
    '',
  ].join('\n');
}

export function leaderboardHtml(rows: readonly LeaderboardRow[], policy: FlaggedPolicy = 'baseline'): string {
  const escape = (text: string) => text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
  const head = leaderboardColumns.map(([name]) => `<th>${escape(name)}</th>`).join('');
  const body = rows
    .map((row) => `<tr>${leaderboardColumns.map(([, value]) => `<td>${escape(value(row) || '–')}</td>`).join('')}</tr>`)
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>a2rl-bench leaderboard</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}th{background:#f3f3f3}td:nth-child(n+4){text-align:right}</style></head>
<body><h1>a2rl-bench leaderboard</h1>
<p>Final score: the private score of each run’s best public submission (the baseline’s when it has none). CI: 95% percentile bootstrap of the mean over runs (the normal interval above ${bootstrapRunsAtMost} runs). Success: final score at least the task’s margin above the baseline. Agent tokens and dollars: from each run’s agent transcript, unknown where it does not say; gain per dollar: mean improvement over mean dollars.</p>
<p class="policy">${escape(flaggedPolicyText(policy))}</p>
<table><thead><tr>${head}</tr></thead><tbody>
${body}
</tbody></table></body></html>
`;
}
