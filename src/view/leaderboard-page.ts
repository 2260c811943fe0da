import { bootstrapRunsAtMost, flaggedPolicyText, leaderboardColumns, type LeaderboardEntry } from '../reports/leaderboard.js';
import type { BoardState, ViewData } from './data.js';
import { escapeHtml, page } from './html.js';

/** The leaderboard page: `a2rl leaderboard`'s columns, with the runs behind each row. */

/** Runs a row links to at most (its newest): at 10⁵ runs every link would make the page megabytes. */
const linkedRuns = 20;

/** What the page shows of the board's state: a live page whose version differs gets the board again (src/view/streams.ts). */
export function boardVersion(state: BoardState): string {
  return state.board ? `${state.board.ranked_at}${state.updating ? '-updating' : ''}` : 'ranking';
}

/** How long ago, in words: "12 s", "3 min", "2 h". */
const ago = (ms: number) =>
  ms < 60_000
    ? `${Math.max(0, Math.round(ms / 1000))} s`
    : ms < 3_600_000
      ? `${Math.round(ms / 60_000)} min`
      : `${Math.round(ms / 3_600_000)} h`;

/**
 * The board as it is (never ranked for the page: see ViewData.boardState): the table, marked when runs changed since it
 * was ranked and the re-rank runs; with no board yet, a note that ranking is under way. The live page swaps in the next.
 */
export function boardSection(state: BoardState): string {
  if (!state.board) {
    return `<p class="updating">Ranking ${state.endedRuns} ended runs… the board shows here when it is ready.</p>`;
  }
  const marker = state.updating ? `<p class="updating muted">Ranked ${ago(Date.now() - state.board.ranked_at)} ago; updating…</p>` : '';
  return marker + leaderboardTable(state.board.rows);
}

function leaderboardTable(rows: readonly LeaderboardEntry[]): string {
  if (rows.length === 0) return '<p class="none">No ended run with a graded baseline yet: nothing to rank.</p>';
  // The first three columns are names (task, agent, driver model); the rest are figures.
  const cell = (text: string, column: number) =>
    `<td class="${column < 2 ? 'nowrap' : column < 3 ? '' : 'num'}">${text === '' ? '–' : escapeHtml(text)}</td>`;
  const body = rows.map(
    (row) =>
      `<tr>${leaderboardColumns.map(([, value], column) => cell(value(row), column)).join('')}` +
      `<td>${row.run_ids
        .slice(-linkedRuns)
        .map((id) => `<a href="/view/runs/${encodeURIComponent(id)}">${escapeHtml(id)}</a>`)
        .join(
          ' ',
        )}${row.run_ids.length > linkedRuns ? ` <span class="muted">and ${row.run_ids.length - linkedRuns} older (all in <a href="/view/leaderboard.json">leaderboard.json</a>)</span>` : ''}</td></tr>`,
  );
  const head = [...leaderboardColumns.map(([name]) => name), 'runs behind it'];
  return (
    `<div class="scroll"><table id="leaderboard"><thead><tr>${head.map((h) => `<th scope="col">${h}</th>`).join('')}</tr></thead>` +
    `<tbody>${body.join('\n')}</tbody></table></div>`
  );
}

export function leaderboardPage(data: ViewData): string {
  const state = data.boardState();
  const body =
    `<h1>Leaderboard</h1><p>Final score: the private score of each run’s best public submission (the baseline’s when it has none). ` +
    `CI: 95% percentile bootstrap of the mean over runs (the normal interval above ${bootstrapRunsAtMost} runs). Success: final score at least the task’s margin above the baseline. ` +
    `The same figures as <code>a2rl leaderboard</code>; updated when a run ends or is checked.</p>` +
    `<p class="policy">${escapeHtml(flaggedPolicyText('baseline'))}</p><div id="board">${boardSection(state)}</div>`;
  const live = `/view/live?after=${data.lastEventId()}&board=${encodeURIComponent(boardVersion(state))}`;
  return page({ title: 'Leaderboard', current: 'leaderboard', body, live });
}
