import type { Task } from '../tasks/task.js';

/**
 * Which environment package each of a task's stand-ins (task.json `standins`) stood for when it was graded, and the
 * data it played on: `stand-in` where the task shows tasks/<library>/standins/<name> at lib/<name> (A2RL_ENV_PACKAGES,
 * full-task.ts), else the upstream package the runtime holds, by its distribution's name and version
 * (`name=upstream:dist@version`), then `;data=` and the first 12 hex of the sha256 of the task's assets manifest (every
 * data file's sha256). Part of the grader version (`Grader.version`), so a score played on the stand-in is never reused
 * for, nor ranked in one row with (src/reports/leaderboard.ts), one played on the upstream package or other data.
 * Empty for a task without stand-ins. Both were found once, when the task was resolved (FullTask `environment`).
 */
export function environmentRecord(task: Task): string {
  if (task.tier !== 'full' || task.environment.packages.length === 0) return '';
  const { packages, assetsManifest } = task.environment;
  return `${packages.map((p) => `${p.name}=${p.playedAs}`).join(',')};data=${assetsManifest.slice(0, 12)}`;
}
