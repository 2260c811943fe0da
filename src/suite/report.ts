import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { analyzeRun, loadRunFacts } from '../reports/analysis.js';
import { escapeHtml } from '../reports/html.js';
import {
  buildLeaderboard,
  type FlaggedPolicy,
  flaggedPolicyText,
  type LeaderboardRow,
  type RunResult,
  runResults,
} from '../reports/leaderboard.js';
import type { Route } from '../reports/route.js';
import type { Store } from '../store/store.js';
import { getTaskFile } from '../tasks/task.js';
import { formatUsd, type PriceTable } from '../transcripts/prices.js';
import { type Cell, cellRuns, runStanding } from './plan.js';
import type { Suite } from './schema.js';

/**
 * The paper's tables of a suite, from the store: per task the baseline and, per agent × model, the mean final score
 * with its 95% CI, the best run, the gain over the baseline, the route mix of the runs' best submissions, flagged and
 * infrastructure-failure counts, tokens and dollars per run and gain per dollar. The figures are the leaderboard's
 * (src/reports/leaderboard.ts), over each cell's runs; rendered as Markdown, CSV, LaTeX and HTML with plots.
 */

/** The training routes, in the paper's three families: supervised, learning from a reward, and the rest. */
const routeFamilies: Record<Route, 'sft' | 'rl' | 'other'> = {
  sft: 'sft',
  reward_filtered_sft: 'sft',
  expert_iteration: 'rl',
  dpo: 'rl',
  grpo: 'rl',
  ppo: 'rl',
  reinforce: 'rl',
  copy_of_base: 'other',
  unknown: 'other',
};

export interface SuiteRow extends LeaderboardRow {
  cell: string;
  /** The best run as scored (its final score) and its id; null when no run was scored. */
  best_score: number | null;
  best_run: string | null;
  /** Scored runs by the route family of their best submission (other: unknown, a copy of the base, no submission). */
  routes: { sft: number; rl: number; other: number };
  /** Runs its suite stopped before they ended: not results, made again by the next `a2rl suite run`. */
  interrupted: number;
}

export interface SuiteReport {
  suite: string;
  policy: FlaggedPolicy;
  /** Per task, the base model's private score (null before its first run was graded). */
  baselines: Array<{ task: string; baseline: number | null }>;
  rows: SuiteRow[];
}

export function buildSuiteReport(
  store: Store,
  suite: Suite,
  cells: readonly Cell[],
  policy: FlaggedPolicy,
  prices?: PriceTable,
): SuiteReport {
  const runsOf = cellRuns(store, cells);
  const results = new Map(suite.tasks.flatMap((task) => runResults(store, task.id, prices)).map((result) => [result.run_id, result]));
  const rows = cells.map((cell): SuiteRow => {
    const runs = runsOf.get(cell)!;
    const standings = runs.map((run) => runStanding(store, run));
    const interrupted = standings.filter((standing) => standing === 'interrupted').length;
    // Every failed run of the cell, graded baseline or not (the leaderboard's count sees only runs with one).
    const infrastructureFailures = standings.filter((standing) => standing === 'failed').length;
    const counted = runs.filter((run) => runStanding(store, run) !== 'interrupted' && results.has(run.id));
    // Grouped by the cell, not by the run's agent column: two replays are two rows.
    const cellResults: RunResult[] = counted.map((run) => ({
      ...results.get(run.id)!,
      agent: cell.agentId,
      driver_model: cell.model ?? '–',
    }));
    const row = buildLeaderboard(cellResults, policy)[0] ?? emptyRow(cell);
    const scored = cellResults.filter(
      (result) => result.infrastructure_failure === null && (result.integrity === 'clean' || policy === 'keep'),
    );
    const best = scored.reduce<RunResult | undefined>(
      (top, result) => (top === undefined || result.final > top.final ? result : top),
      undefined,
    );
    const routes = { sft: 0, rl: 0, other: 0 };
    for (const result of cellResults.filter((r) => r.infrastructure_failure === null)) routes[routeFamilyOf(store, result.run_id)]++;
    return {
      ...row,
      infrastructure_failures: infrastructureFailures,
      cell: cell.id,
      best_score: best?.final ?? null,
      best_run: best?.run_id ?? null,
      routes,
      interrupted,
    };
  });
  const baselines = suite.tasks.map((task) => {
    const known = rows.filter((row) => row.task === task.id && row.baseline !== null);
    return { task: task.id, baseline: known[0]?.baseline ?? null };
  });
  return { suite: suite.name, policy, baselines, rows };
}

/** A cell with no run yet: a row of no figures. */
function emptyRow(cell: Cell): LeaderboardRow {
  return {
    agent: cell.agentId,
    driver_model: cell.model ?? '–',
    task: cell.task.id,
    runs: 0,
    mean: null,
    std: null,
    ci_low: null,
    ci_high: null,
    mean_improvement: null,
    baseline: null,
    success_rate: null,
    success_margin: getTaskFile(cell.task.id).successMargin,
    infrastructure_failures: 0,
    flagged_runs: 0,
    incomplete_runs: 0,
    cheating_rate: 0,
    mean_tokens: null,
    tokens_runs: 0,
    mean_cost_usd: null,
    cost_runs: 0,
    gain_per_dollar: null,
  };
}

/** The route family of a run's best submission: what its training did where it scored best. */
function routeFamilyOf(store: Store, runId: string): 'sft' | 'rl' | 'other' {
  const analysis = analyzeRun(loadRunFacts(store, runId));
  const best = analysis.metrics.best;
  const route = best && analysis.iterations.find((iteration) => iteration.submission_id === best.submission_id)?.route;
  return route ? routeFamilies[route] : 'other';
}

const fixed = (x: number | null, digits = 2) => (x === null ? '' : x.toFixed(digits));
const signed = (x: number | null) => (x === null ? '' : `${x >= 0 ? '+' : ''}${x.toFixed(2)}`);

/** The columns every format shows, in order: a name and a row's cell as text ('' for none). */
const columns: Array<[string, (row: SuiteRow) => string]> = [
  ['task', (r) => r.task],
  ['agent × model', (r) => r.cell],
  ['runs', (r) => String(r.runs)],
  ['mean final score', (r) => fixed(r.mean)],
  ['95% CI low', (r) => fixed(r.ci_low)],
  ['95% CI high', (r) => fixed(r.ci_high)],
  ['best run score', (r) => fixed(r.best_score)],
  ['best run', (r) => r.best_run ?? ''],
  ['baseline', (r) => fixed(r.baseline)],
  ['Δ over baseline', (r) => signed(r.mean_improvement)],
  ['routes SFT', (r) => String(r.routes.sft)],
  ['routes RL', (r) => String(r.routes.rl)],
  ['routes other', (r) => String(r.routes.other)],
  ['flagged runs', (r) => String(r.flagged_runs)],
  ['incomplete checks', (r) => String(r.incomplete_runs)],
  ['infrastructure failures', (r) => String(r.infrastructure_failures)],
  ['interrupted', (r) => String(r.interrupted)],
  ['tokens per run', (r) => (r.mean_tokens === null ? '' : String(r.mean_tokens))],
  ['$ per run', (r) => (r.mean_cost_usd === null ? '' : formatUsd(r.mean_cost_usd))],
  ['Δ per $', (r) => fixed(r.gain_per_dollar)],
];

const legend =
  'Final score: the private score of a run’s best public submission (the baseline’s without one). CI: 95% percentile bootstrap of the mean. ' +
  'Δ: mean final score less the baseline. Routes: the route family of each scored run’s best submission (SFT: supervised or reward-filtered SFT; ' +
  'RL: expert iteration, DPO, GRPO, PPO, REINFORCE; other: unknown, a copy of the base model, no submission). Infrastructure failures and ' +
  'interrupted runs are not counted. Tokens and $: from the agents’ transcripts, empty where they do not say; Δ per $: mean gain over mean dollars.';

/** One CSV table, every figure in a column of its own. */
export function suiteCsv(report: SuiteReport): string {
  const quote = (text: string) => (/[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text);
  return [columns.map(([name]) => name), ...report.rows.map((row) => columns.map(([, value]) => value(row)))]
    .map((cells) => cells.map(quote).join(','))
    .join('\n')
    .concat('\n');
}

const byTask = (report: SuiteReport) =>
  report.baselines.map(({ task, baseline }) => ({ task, baseline, rows: report.rows.filter((row) => row.task === task) }));
/** A task's table leaves out the task column: the section names it. */
const tableColumns = columns.slice(1);

export function suiteMarkdown(report: SuiteReport): string {
  const line = (cells: string[]) => `| ${cells.map((cell) => cell.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [
    `# Suite ${report.suite}`,
    '',
    legend,
    '',
    flaggedPolicyText(report.policy),
    '',
    ...byTask(report).flatMap(({ task, baseline, rows }) => [
      `## ${task} (baseline ${baseline === null ? 'not graded yet' : baseline.toFixed(2)})`,
      '',
      line(tableColumns.map(([name]) => name)),
      line(tableColumns.map(() => '---')),
      ...rows.map((row) => line(tableColumns.map(([, value]) => value(row) || '–'))),
      '',
    ]),
  ].join('\n');
}

const latexEscape = (text: string) =>
  text.replace(
    /[\\&%$#_{}~^]/g,
    (c) => ({ '\\': '\\textbackslash{}', '~': '\\textasciitilde{}', '^': '\\textasciicircum{}' })[c] ?? `\\${c}`,
  );

/** One booktabs table per task, for the paper: the main figures (the CSV has them all). */
export function suiteLatex(report: SuiteReport): string {
  const main = [
    'agent × model',
    'runs',
    'mean final score',
    'best run score',
    'Δ over baseline',
    'routes SFT',
    'routes RL',
    'routes other',
    'flagged runs',
    'infrastructure failures',
    '$ per run',
    'Δ per $',
  ];
  const picked = tableColumns.filter(([name]) => main.includes(name));
  const ci = (row: SuiteRow) => (row.mean === null ? '--' : `${row.mean.toFixed(2)} [${fixed(row.ci_low)}, ${fixed(row.ci_high)}]`);
  return [
    '% a2rl suite report: needs \\usepackage{booktabs}',
    ...byTask(report).flatMap(({ task, baseline, rows }) => [
      '\\begin{table}[t]',
      '\\centering',
      `\\caption{${latexEscape(`${task}: baseline ${baseline === null ? 'not graded' : baseline.toFixed(2)}; mean final score [95% CI]`)}}`,
      `\\begin{tabular}{l${'r'.repeat(picked.length - 1)}}`,
      '\\toprule',
      `${picked.map(([name]) => latexEscape(name.replace('×', 'x').replace('Δ', 'gain'))).join(' & ')} \\\\`,
      '\\midrule',
      ...rows.map(
        (row) =>
          `${picked.map(([name, value]) => latexEscape(name === 'mean final score' ? ci(row) : value(row) || '--')).join(' & ')} \\\\`,
      ),
      '\\bottomrule',
      '\\end{tabular}',
      '\\end{table}',
      '',
    ]),
  ].join('\n');
}

const require = createRequire(import.meta.url);

/** A page on its own (uPlot inlined, nothing fetched): per task its table and a plot of each row's mean, CI and best run against the baseline. */
export function suiteHtml(report: SuiteReport): string {
  const uplotJs = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8');
  const uplotCss = readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8');
  const sections = byTask(report).map(({ task, baseline, rows }, index) => {
    const head = tableColumns.map(([name]) => `<th>${escapeHtml(name)}</th>`).join('');
    const body = rows
      .map((row) => `<tr>${tableColumns.map(([, value]) => `<td>${escapeHtml(value(row) || '–')}</td>`).join('')}</tr>`)
      .join('\n');
    return `<section><h2>${escapeHtml(task)} <small>baseline ${baseline === null ? 'not graded yet' : baseline.toFixed(2)}</small></h2>
<div class="plot" id="plot-${index}"></div>
<table><thead><tr>${head}</tr></thead><tbody>
${body}
</tbody></table></section>`;
  });
  const plots = byTask(report).map(({ baseline, rows }) => ({
    labels: rows.map((row) => row.cell),
    baseline,
    mean: rows.map((row) => row.mean),
    low: rows.map((row) => row.ci_low),
    high: rows.map((row) => row.ci_high),
    best: rows.map((row) => row.best_score),
  }));
  // JSON in a script element: `<` escaped so no label can close it.
  const data = JSON.stringify(plots).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>a2rl suite ${escapeHtml(report.suite)}</title>
<style>${uplotCss}
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1200px}table{border-collapse:collapse;margin:.5em 0 2em}td,th{border:1px solid #ccc;padding:3px 8px}th{background:#f3f3f3}td:nth-child(n+2){text-align:right}small{color:#666;font-weight:normal}</style></head>
<body><h1>Suite ${escapeHtml(report.suite)}</h1>
<p>${escapeHtml(legend)}</p>
<p class="policy">${escapeHtml(flaggedPolicyText(report.policy))}</p>
${sections.join('\n')}
<script>${uplotJs}</script>
<script>
const plots = ${data};
plots.forEach((p, i) => {
  const x = p.labels.map((_, j) => j + 1);
  const points = (stroke, size) => ({ stroke, paths: () => null, points: { show: true, size, stroke, fill: stroke } });
  new uPlot({
    width: Math.min(1100, 160 + 120 * x.length), height: 260,
    scales: { x: { time: false, range: [0.5, x.length + 0.5] } },
    axes: [{ values: (u, ticks) => ticks.map((t) => Number.isInteger(t) ? (p.labels[t - 1] ?? '') : ''), splits: () => x }, { label: 'final score' }],
    series: [{}, { label: 'mean', ...points('#1f77b4', 10) }, { label: 'CI low', ...points('#9ecae1', 6) }, { label: 'CI high', ...points('#9ecae1', 6) },
      { label: 'best run', ...points('#2ca02c', 7) }, { label: 'baseline', stroke: '#d62728', dash: [6, 4] }],
  }, [x, p.mean, p.low, p.high, p.best, x.map(() => p.baseline)], document.getElementById('plot-' + i));
});
</script>
</body></html>
`;
}
