import { formatDuration } from '../util/duration.js';
import type { RunIntegrity } from '../integrity/verdict.js';
import type { Iteration, RunAnalysis } from './analysis.js';
import { escapeHtml } from './html.js';
import { type Timeline, timelineHtml, timelineStyle } from './timeline.js';
import { curveNotes } from './metrics.js';
import { type RunUsage, totalTokens } from '../transcripts/run-usage.js';
import { formatUsd } from '../transcripts/prices.js';

/**
 * One run's report as a static HTML page (inline SVG, the timeline's search in report.js beside it, no inline
 * script, nothing fetched) or as Markdown. Links are relative to an export folder (see export.ts): logs/, code/.
 */

const fmt = (x: number | null | undefined, digits = 1) => (x === null || x === undefined ? '–' : x.toFixed(digits));
const pct = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${(x * 100).toFixed(0)}%`);
const secs = (x: number | null | undefined) => (x === null || x === undefined ? '–' : formatDuration(x));
const signed = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${x >= 0 ? '+' : ''}${x.toFixed(1)}`);

/** What the agent spent, from its transcript: "unknown" where the transcript does not say. */
function usageRows(usage: RunUsage): Array<[string, string]> {
  const count = (x: number | 'unknown') => (x === 'unknown' ? x : x.toLocaleString('en-US'));
  const tokens = totalTokens(usage);
  const source =
    usage.cost_source === 'agent' ? `, ${usage.agent}'s own figure` : usage.price_table ? `, priced from ${usage.price_table}` : '';
  return [
    [
      'agent tokens (input, of it cached / output)',
      tokens === 'unknown'
        ? 'unknown'
        : `${count(tokens)} (${count(usage.input_tokens)}, ${count(usage.cached_input_tokens)} / ${count(usage.output_tokens)})`,
    ],
    ['agent cost', usage.cost_usd === 'unknown' ? 'unknown' : `$${formatUsd(usage.cost_usd)}${source}`],
    ['agent turns / tool calls', `${usage.turns} / ${usage.tool_calls}`],
  ];
}

/** The figures every format shows, as label/value rows; with the agent's usage where given. */
export function metricRows(a: RunAnalysis, usage?: RunUsage): Array<[string, string]> {
  const m = a.metrics;
  return [
    ['baseline (public / private)', a.baseline ? `${fmt(a.baseline.public)} / ${fmt(a.baseline.private)}` : '–'],
    ['best submission (public / private)', m.best ? `sub-${m.best.submission_id}: ${fmt(m.best.public)} / ${fmt(m.best.private)}` : '–'],
    ['last submission (public / private)', m.last ? `sub-${m.last.submission_id}: ${fmt(m.last.public)} / ${fmt(m.last.private)}` : '–'],
    [
      'improvement of best (public / private)',
      m.improvement_best ? `${signed(m.improvement_best.public)} / ${signed(m.improvement_best.private)}` : '–',
    ],
    [
      'improvement of last (public / private)',
      m.improvement_last ? `${signed(m.improvement_last.public)} / ${signed(m.improvement_last.private)}` : '–',
    ],
    ['submissions (valid / all)', `${m.valid_submissions} / ${m.submissions}`],
    ['valid-submission rate', pct(m.valid_submission_rate)],
    ['time to first valid submission', secs(m.time_to_first_valid_s)],
    ['time to first improvement', secs(m.time_to_first_improvement_s)],
    ['time to best', secs(m.time_to_best_s)],
    ['monotonic ratio', fmt(m.monotonic_ratio, 2)],
    ['copies of the base model submitted', String(m.base_model_copies)],
    [
      'budget used (wall / compute / submissions / episodes)',
      `${pct(m.budget_share.wall)} / ${pct(m.budget_share.compute)} / ${pct(m.budget_share.submissions)} / ${pct(m.budget_share.rollout_episodes)}`,
    ],
    ['gap between last submission and budget end', secs(m.gap_to_budget_end_s)],
    ['training jobs (failed / all)', `${m.training_failures} / ${m.training_jobs}`],
    ['training failure rate', pct(m.training_failure_rate)],
    ['rollout episodes (batches)', `${m.rollout_episodes} (${m.rollout_batches})`],
    ['compute used', `${secs(m.compute_s)} CPU`],
    ['wall time', secs(m.wall_s)],
    ['tool calls (errors)', `${m.tool_calls} (${m.tool_errors})`],
    ['failure type', a.failure_type ?? 'none (beat the baseline)'],
    ...(usage ? usageRows(usage) : []),
  ];
}

const hyper = (it: Iteration) =>
  Object.entries(it.hyperparameters)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');

function iterationCells(it: Iteration): string[] {
  return [
    String(it.index),
    `sub-${it.submission_id}`,
    secs(it.t_s),
    it.scores ? `${fmt(it.scores.public)} / ${fmt(it.scores.private)}` : '–',
    `${it.route}${it.uses_rollouts ? ' + rollouts' : ''}`,
    hyper(it) || '–',
    it.outcome,
    it.failure_type ? `${it.failure_type}${it.evidence ? ` (${it.evidence})` : ''}` : '–',
  ];
}

const iterationHead = ['#', 'submission', 'at', 'score (public / private)', 'route', 'hyperparameters', 'outcome', 'failure type'];

export function renderMarkdown(a: RunAnalysis, narrative?: string, usage?: RunUsage, integrity?: RunIntegrity): string {
  const row = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  const lines = [
    `# Run ${a.run.id}`,
    '',
    `Task **${a.run.task}**, agent ${who(a)}; ${a.run.state}${a.run.end_reason ? ` (${a.run.end_reason})` : ''}.`,
    '',
    ...(integrity ? [integrityMarkdown(integrity), ''] : []),
    row(['metric', 'value']),
    row(['---', '---']),
    ...metricRows(a, usage).map(row),
    '',
    '## Iterations',
    '',
    a.iterations.length === 0
      ? 'No submission.'
      : [row(iterationHead), row(iterationHead.map(() => '---')), ...a.iterations.map((it) => row(iterationCells(it)))].join('\n'),
    '',
    '## Jobs',
    '',
    row(['job', 'kind', 'start', 'end', 'state', 'compute', 'command']),
    row(['---', '---', '---', '---', '---', '---', '---']),
    ...a.jobs.map((j) =>
      row([j.name, j.kind, secs(j.start_s), secs(j.end_s), j.state, j.charged ? secs(j.compute_s) : 'not charged', j.command.slice(0, 80)]),
    ),
  ];
  if (narrative) lines.push('', '## Narrative', '', narrative);
  return `${lines.join('\n')}\n`;
}

export function who(a: { run: RunAnalysis['run'] }): string {
  const { agent, agent_version, driver_model, label } = a.run;
  const name = agent ? `${agent}${agent_version ? ` ${agent_version}` : ''}` : (label ?? 'unlabelled');
  return driver_model ? `${name} (${driver_model})` : name;
}

interface Axis {
  min: number;
  max: number;
}

const width = 640;
const height = 220;
const margin = { left: 48, right: 16, top: 12, bottom: 32 };

function scale(axis: Axis, from: number, to: number) {
  const span = axis.max - axis.min || 1;
  return (v: number) => from + ((v - axis.min) / span) * (to - from);
}

function frame(
  id: string,
  title: string,
  x: Axis,
  y: Axis,
  xLabel: string,
  yLabel: string,
  body: (sx: (v: number) => number, sy: (v: number) => number) => string,
): string {
  const sx = scale(x, margin.left, width - margin.right);
  const sy = scale(y, height - margin.bottom, margin.top);
  const ticks = (axis: Axis) => [0, 0.25, 0.5, 0.75, 1].map((f) => axis.min + f * (axis.max - axis.min));
  const xTicks = ticks(x)
    .map(
      (v) =>
        `<text x="${sx(v).toFixed(1)}" y="${height - margin.bottom + 14}" text-anchor="middle">${v >= 100 ? Math.round(v) : +v.toFixed(2)}</text>`,
    )
    .join('');
  const yTicks = ticks(y)
    .map(
      (v) =>
        `<line x1="${margin.left}" x2="${width - margin.right}" y1="${sy(v).toFixed(1)}" y2="${sy(v).toFixed(1)}" class="grid"/><text x="${margin.left - 6}" y="${(sy(v) + 4).toFixed(1)}" text-anchor="end">${+v.toPrecision(3)}</text>`,
    )
    .join('');
  return `<figure><figcaption>${escapeHtml(title)}</figcaption><svg id="${id}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(title)}">
${yTicks}${xTicks}
<text x="${(margin.left + width - margin.right) / 2}" y="${height - 4}" text-anchor="middle" class="label">${escapeHtml(xLabel)}</text>
<text x="12" y="${(margin.top + height - margin.bottom) / 2}" text-anchor="middle" class="label" transform="rotate(-90 12 ${(margin.top + height - margin.bottom) / 2})">${escapeHtml(yLabel)}</text>
${body(sx, sy)}
</svg></figure>`;
}

function scoreChart(
  a: RunAnalysis,
  id: string,
  title: string,
  xLabel: string,
  xMax: number,
  xOf: (s: RunAnalysis['submissions'][number]) => number,
): string {
  const graded = a.submissions.filter((s) => s.scores);
  const y = { min: 0, max: 100 };
  return frame(id, title, { min: 0, max: xMax }, y, xLabel, 'score (0–100)', (sx, sy) => {
    const parts: string[] = [];
    if (a.baseline) {
      parts.push(
        `<line class="baseline" x1="${sx(0)}" x2="${sx(xMax)}" y1="${sy(a.baseline.public).toFixed(1)}" y2="${sy(a.baseline.public).toFixed(1)}"><title>baseline ${fmt(a.baseline.public)}</title></line>`,
      );
    }
    parts.push(`<line class="budget-end" x1="${sx(xMax)}" x2="${sx(xMax)}" y1="${sy(0)}" y2="${sy(100)}"/>`);
    let best = Number.NEGATIVE_INFINITY;
    const steps = graded.map((s) => {
      best = Math.max(best, s.scores!.public);
      return `${sx(Math.min(xOf(s), xMax)).toFixed(1)},${sy(best).toFixed(1)}`;
    });
    if (steps.length > 1) parts.push(`<polyline class="best-so-far" points="${steps.join(' ')}"/>`);
    for (const s of graded) {
      const cx = sx(Math.min(xOf(s), xMax)).toFixed(1);
      parts.push(
        `<circle class="score-point" data-submission="sub-${s.submission_id}" cx="${cx}" cy="${sy(s.scores!.public).toFixed(1)}" r="5"><title>sub-${s.submission_id}: public ${fmt(s.scores!.public)}, private ${fmt(s.scores!.private)}</title></circle>`,
        `<rect class="private-point" x="${(Number(cx) - 3).toFixed(1)}" y="${(sy(s.scores!.private) - 3).toFixed(1)}" width="6" height="6"><title>sub-${s.submission_id} private ${fmt(s.scores!.private)}</title></rect>`,
      );
    }
    return parts.join('\n');
  });
}

function burnDownChart(a: RunAnalysis): string {
  const { limits } = a.run;
  const wallMax = Math.max(limits.wallSeconds, a.metrics.wall_s);
  const computeMax = Math.max(limits.computeSeconds, a.metrics.compute_s);
  return frame(
    'budget-burn-down',
    'Budget left over time, share of each limit (grey: wall clock, blue: compute, orange: rollout episodes)',
    { min: 0, max: wallMax },
    { min: 0, max: 100 },
    'run time (s)',
    'left (%)',
    (sx, sy) => {
      const left = (used: number, limit: number) => (limit > 0 ? Math.max(0, 100 * (1 - used / limit)) : 0);
      const compute = [{ t_s: 0, compute_s: 0 }, ...a.compute_curve];
      const computePoints = compute.map((p, i) => {
        const prev = i > 0 ? compute[i - 1]! : p;
        return `${sx(p.t_s).toFixed(1)},${sy(left(prev.compute_s, computeMax)).toFixed(1)} ${sx(p.t_s).toFixed(1)},${sy(left(p.compute_s, computeMax)).toFixed(1)}`;
      });
      computePoints.push(`${sx(a.metrics.wall_s).toFixed(1)},${sy(left(a.metrics.compute_s, computeMax)).toFixed(1)}`);
      const episodes = a.jobs.filter((j) => j.kind === 'rollouts' && j.end_s !== null).sort((x, y) => x.end_s! - y.end_s!);
      let used = 0;
      const episodePoints = [`${sx(0)},${sy(100)}`];
      for (const j of episodes) {
        episodePoints.push(`${sx(j.end_s!).toFixed(1)},${sy(left(used, limits.rolloutEpisodes)).toFixed(1)}`);
        used += j.episodes_done ?? 0;
        episodePoints.push(`${sx(j.end_s!).toFixed(1)},${sy(left(used, limits.rolloutEpisodes)).toFixed(1)}`);
      }
      episodePoints.push(`${sx(a.metrics.wall_s).toFixed(1)},${sy(left(used, limits.rolloutEpisodes)).toFixed(1)}`);
      return [
        `<polyline class="wall-left" points="${sx(0)},${sy(100)} ${sx(a.metrics.wall_s).toFixed(1)},${sy(left(a.metrics.wall_s, limits.wallSeconds)).toFixed(1)}"><title>wall clock</title></polyline>`,
        `<polyline class="compute-left" points="${computePoints.join(' ')}"><title>compute</title></polyline>`,
        `<polyline class="episodes-left" points="${episodePoints.join(' ')}"><title>rollout episodes</title></polyline>`,
      ].join('\n');
    },
  );
}

function timelineChart(a: RunAnalysis): string {
  const jobs = a.jobs;
  const rowHeight = 14;
  const chartHeight = margin.top + margin.bottom + Math.max(1, jobs.length) * rowHeight;
  const xMax = Math.max(a.run.limits.wallSeconds, a.metrics.wall_s, 1);
  const sx = scale({ min: 0, max: xMax }, 90, width - margin.right);
  const bars = jobs.map((j, i) => {
    const y = margin.top + i * rowHeight;
    const end = j.end_s ?? a.metrics.wall_s;
    return `<a href="logs/${j.name}.log"><text x="86" y="${y + 10}" text-anchor="end">${j.name} ${j.kind}</text><rect class="job ${escapeHtml(j.state)}" x="${sx(j.start_s).toFixed(1)}" y="${y + 2}" width="${Math.max(1.5, sx(end) - sx(j.start_s)).toFixed(1)}" height="${rowHeight - 4}"><title>${j.name} ${j.kind} ${escapeHtml(j.state)} ${secs(j.start_s)}–${secs(end)}: ${escapeHtml(j.command.slice(0, 120))}</title></rect></a>`;
  });
  const marks = a.submissions.map(
    (s) =>
      `<line class="submission-mark" x1="${sx(s.t_s).toFixed(1)}" x2="${sx(s.t_s).toFixed(1)}" y1="${margin.top}" y2="${chartHeight - margin.bottom}"><title>sub-${s.submission_id} at ${secs(s.t_s)}</title></line>`,
  );
  return `<figure><figcaption>Job timeline (bars link to logs; dashed lines: submissions)</figcaption><svg id="job-timeline" viewBox="0 0 ${width} ${chartHeight}" width="${width}" height="${chartHeight}" role="img" aria-label="job timeline">
${bars.join('\n')}
${marks.join('\n')}
<text x="${(90 + width) / 2}" y="${chartHeight - 8}" text-anchor="middle" class="label">run time (s), 0–${Math.round(xMax)}</text>
</svg></figure>`;
}

/** Each training job's loss (src/reports/metrics.ts) by step, from its log's end; none where its log showed no loss. */
function lossCharts(a: RunAnalysis): string {
  return a.jobs
    .filter((j) => j.loss && j.loss.points.some(([, loss]) => loss !== null))
    .map((j) => {
      const { points } = j.loss!;
      const finite = points.flatMap(([x, loss]) => (loss === null ? [] : [[x, loss] as const]));
      const ys = finite.map(([, loss]) => loss);
      const notes = curveNotes(j.loss!);
      const title = `Training loss of ${j.name} by step (its log's end)${notes.length > 0 ? `; ${notes.join('; ')}` : ''}`;
      const x = { min: finite[0]![0], max: Math.max(finite.at(-1)![0], finite[0]![0] + 1) };
      const y = { min: Math.min(...ys), max: Math.max(...ys) };
      return frame(`loss-${j.name}`, title, x, y, 'step', 'loss', (sx, sy) => {
        // A gap (null) ends a segment: each restart is its own line.
        const segments: string[][] = [[]];
        for (const [px, loss] of points) {
          if (loss === null) segments.push([]);
          else segments.at(-1)!.push(`${sx(px).toFixed(1)},${sy(loss).toFixed(1)}`);
        }
        return segments
          .filter((segment) => segment.length > 0)
          .map((segment) => `<polyline class="loss" points="${segment.join(' ')}"/>`)
          .join('\n');
      });
    })
    .join('\n');
}

const style = `body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}figure{margin:1.5em 0}figcaption{font-weight:600;margin-bottom:4px}svg{font-size:10px;background:#fff;border:1px solid #eee}
.grid{stroke:#eee}.label{font-size:11px}.baseline{stroke:#999;stroke-dasharray:4 3}.budget-end{stroke:#c33;stroke-dasharray:2 2}
.best-so-far{fill:none;stroke:#36c;stroke-width:1.5}.score-point{fill:#36c}.private-point{fill:none;stroke:#e80}
.wall-left{fill:none;stroke:#888}.loss{fill:none;stroke:#0b5cad;stroke-width:1.5}.compute-left{fill:none;stroke:#36c;stroke-width:1.5}.episodes-left{fill:none;stroke:#e80}
.job{fill:#6a6}.job.failed,.job.oom_killed,.job.timed_out,.job.lost{fill:#d44}.job.cancelled,.job.budget_stopped{fill:#bbb}.job.running{fill:#36c}
.submission-mark{stroke:#36c;stroke-dasharray:3 3}code{font-size:12px}`;

/**
 * The run's integrity (src/integrity/) at the top of its report: its verdict, why it is not clean, what the
 * contamination check read and what it could not read, each unread file with its size.
 */
export function integrityBlock(integrity?: RunIntegrity, evidence = 'Evidence: <a href="integrity.json">integrity.json</a>.'): string {
  if (!integrity) return '';
  const checks = `contamination check: ${integrity.contamination}${integrity.matched_items ? ` (${integrity.matched_items} hidden items found)` : ''}; review: ${integrity.review}${integrity.reviewer ? ` by ${integrity.reviewer}` : ''}`;
  const coverage = integrity.coverage;
  const read = coverage
    ? `<p class="integrity-read">Read: ${coverage.read_files} files, ${formatBytes(coverage.read_bytes)}. Not read: ${coverage.unread.length === 0 ? 'nothing' : `${formatBytes(coverage.unread_bytes)} (${(coverage.unread_share * 100).toFixed(1)}% of the run's bytes: anything unread leaves the check incomplete)`}.</p>` +
      (coverage.unread.length > 0
        ? `<ul class="integrity-unread">${coverage.unread.map((u) => `<li><code>${escapeHtml(u.path)}</code> (${formatBytes(u.bytes)}): ${escapeHtml(u.reason)}</li>`).join('')}</ul>`
        : '')
    : '';
  if (integrity.verdict === 'clean') {
    const notes = integrity.reasons.length > 0 ? ` Noted: ${escapeHtml(integrity.reasons.join('; '))}.` : '';
    return `<div class="integrity clean"><p>Integrity: <b>clean</b> (${escapeHtml(checks)}).${notes} ${evidence}</p>${read}</div>`;
  }
  const [label, colour] = integrity.verdict === 'flagged' ? ['Flagged', '#c0392b'] : ['Incomplete', '#b9770e'];
  return (
    `<div class="integrity ${integrity.verdict}" style="background:#fdf2e8;border:1px solid ${colour};padding:6px 10px">` +
    `<p><b>${label}</b>: ${escapeHtml(integrity.reasons.join('; '))} (${escapeHtml(checks)}). Not clean: the leaderboard scores it as its baseline unless told otherwise (<code>--flagged</code>). ${evidence}</p>${read}</div>`
  );
}

/** The run's integrity in the Markdown report: its verdict and why, what the check read and what it could not. */
function integrityMarkdown(integrity: RunIntegrity): string {
  const why = integrity.reasons.length > 0 ? `: ${integrity.reasons.join('; ')}` : '';
  const coverage = integrity.coverage;
  const read = coverage
    ? ` Read ${coverage.read_files} files (${formatBytes(coverage.read_bytes)}); not read: ${
        coverage.unread.length === 0 ? 'nothing' : coverage.unread.map((u) => `${u.path} (${formatBytes(u.bytes)}, ${u.reason})`).join(', ')
      }.`
    : '';
  return `Integrity: **${integrity.verdict}**${why}.${read}`;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

export function renderHtml(a: RunAnalysis, narrative?: string, timeline?: Timeline, usage?: RunUsage, integrity?: RunIntegrity): string {
  const table = (head: string[], rows: string[][]) =>
    `<table><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.join('')}</tr>`).join('\n')}</tbody></table>`;
  const cell = (text: string) => `<td>${escapeHtml(text)}</td>`;
  const codeLink = (tree: string | null) => (tree ? `<td><a href="code/${tree}/">${tree.slice(0, 12)}</a></td>` : '<td>–</td>');
  const { limits } = a.run;
  // The route's cell says, on hover, what the route was read from.
  const iterations = a.iterations.map((it) => [
    ...iterationCells(it).map((text, i) => (i === 4 ? `<td title="${escapeHtml(it.route_basis)}">${escapeHtml(text)}</td>` : cell(text))),
    codeLink(it.code_tree),
  ]);
  const jobs = a.jobs.map((j) => [
    `<td><a href="logs/${j.name}.log">${j.name}</a></td>`,
    ...[j.kind, secs(j.start_s), secs(j.end_s), j.state, j.charged ? secs(j.compute_s) : 'not charged'].map(cell),
    `<td><code>${escapeHtml(j.command.slice(0, 160))}</code></td>`,
    codeLink(j.code_tree),
  ]);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>a2rl run ${escapeHtml(a.run.id)}</title><style>${style}
${timelineStyle}</style></head>
<body>
<h1>Run ${escapeHtml(a.run.id)}</h1>
<p>Task <b>${escapeHtml(a.run.task)}</b>, agent <b>${escapeHtml(who(a))}</b>; ${escapeHtml(a.run.state)}${a.run.end_reason ? ` (${escapeHtml(a.run.end_reason)})` : ''}.
Raw record: <a href="events.jsonl">events.jsonl</a>, <a href="scores.json">scores.json</a>, <a href="summary.json">summary.json</a>.</p>
${integrityBlock(integrity)}
${table(
  ['metric', 'value'],
  metricRows(a, usage).map(([k, v]) => [cell(k), cell(v)]),
)}
${scoreChart(a, 'score-vs-time', 'Score trajectory against time (dots: public, squares: private; line: best so far; red: wall-clock budget end)', 'run time (s)', Math.max(limits.wallSeconds, ...a.submissions.map((s) => s.t_s), 1), (s) => s.t_s)}
${scoreChart(a, 'score-vs-compute', 'Score trajectory against compute budget used', 'compute used when submitted (s)', Math.max(limits.computeSeconds, a.metrics.compute_s, 1), (s) => s.compute_s)}
${burnDownChart(a)}
<h2>Iterations</h2>
${a.iterations.length === 0 ? '<p>No submission.</p>' : table([...iterationHead, 'code'], iterations)}
<h2>Jobs</h2>
${timelineChart(a)}
${lossCharts(a)}
${table(['job', 'kind', 'start', 'end', 'state', 'compute', 'command', 'code'], jobs)}
${
  narrative
    ? `<h2>Narrative</h2>${narrative
        .split(/\n{2,}/)
        .map((p) => `<p>${escapeHtml(p)}</p>`)
        .join('\n')}<p><i>Written by a language model from the facts above; the facts are authoritative.</i></p>`
    : ''
}
${timeline ? timelineHtml(timeline) : ''}
</body></html>
`;
}
