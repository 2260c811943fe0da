import type { ViewData } from './data.js';
import { escapeHtml, page } from './html.js';

/** The leaderboard page: `a2rl leaderboard`'s columns, with the runs behind each row. */

export function leaderboardTable(data: ViewData): string {
  const rows = data.leaderboard();
  if (rows.length === 0) return '<p class="none">No ended run with a graded baseline yet: nothing to rank.</p>';
  const num = (x: number | null) => `<td class="num">${x === null ? '–' : x.toFixed(2)}</td>`;
  const body = rows.map(
    (row) =>
      `<tr><td class="nowrap">${escapeHtml(row.task)}</td><td class="nowrap">${escapeHtml(row.agent)}</td><td>${escapeHtml(row.driver_model)}</td>` +
      `<td class="num">${row.runs}</td>${num(row.mean)}${num(row.std)}${num(row.ci_low)}${num(row.ci_high)}${num(row.baseline)}` +
      `${num(row.mean_improvement)}${num(row.success_rate)}<td class="num">${row.success_margin}</td><td class="num">${row.infrastructure_failures}</td>` +
      `<td>${row.run_ids.map((id) => `<a href="/view/runs/${encodeURIComponent(id)}">${escapeHtml(id)}</a>`).join(' ')}</td></tr>`,
  );
  const head = [
    'task',
    'agent',
    'driver model',
    'runs',
    'mean final score',
    'std',
    '95% CI low',
    '95% CI high',
    'baseline',
    'mean improvement',
    'success rate',
    'success margin',
    'infrastructure failures (not counted)',
    'runs behind it',
  ];
  return (
    `<div class="scroll"><table id="leaderboard"><thead><tr>${head.map((h) => `<th scope="col">${h}</th>`).join('')}</tr></thead>` +
    `<tbody>${body.join('\n')}</tbody></table></div>`
  );
}

export function leaderboardPage(data: ViewData): string {
  const body =
    `<h1>Leaderboard</h1><p>Final score: the private score of each run’s best public submission (the baseline’s when it has none). ` +
    `CI: 95% percentile bootstrap of the mean over runs. Success: final score at least the task’s margin above the baseline. ` +
    `The same figures as <code>a2rl leaderboard</code>; updated when a run ends.</p><div id="board">${leaderboardTable(data)}</div>`;
  return page({ title: 'Leaderboard', current: 'leaderboard', body, live: `/view/live?after=${data.lastEventId()}&board=1` });
}
