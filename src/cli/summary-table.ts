import Table from 'cli-table3';
import type { RunSummary } from '../reports/summary.js';
import { formatDuration } from '../util/duration.js';

/** Run summaries as the terminal table `a2rl demo` and `a2rl run` print. */
export function formatSummaryTable(summaries: RunSummary[]): string {
  const colour = process.stdout.isTTY === true;
  const table = new Table({
    style: { head: colour ? ['cyan'] : [], border: colour ? ['grey'] : [] },
    head: [
      'task',
      'level',
      'metric',
      'baseline',
      'best score',
      'improvement',
      'private (final)',
      'submissions',
      'compute used',
      'rollout episodes',
      'wall time',
    ],
  });
  const score = (x: number | undefined) => (x === undefined ? '–' : x.toFixed(1));
  const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}`;
  for (const s of summaries) {
    const lc = s.best?.metrics.lc_win_rate;
    table.push([
      s.task,
      s.level,
      s.metric,
      score(s.baseline?.public),
      `${score(s.best?.public)}${typeof lc === 'number' ? ` (LC ${lc.toFixed(1)})` : ''}`,
      s.improvement ? signed(s.improvement.public) : '–',
      s.best && s.improvement ? `${score(s.best.private)} (${signed(s.improvement.private)})` : '–',
      s.submissions,
      `${formatDuration(s.compute_seconds)} CPU`,
      s.rollout_episodes,
      formatDuration(s.wall_seconds),
    ]);
  }
  return table.toString();
}
