import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fullTierRuntimeTarget, upstreamPackage } from '../tasks/full-task.js';
import type { Task } from '../tasks/task.js';
import { sha256 } from '../util/hashing.js';

const records = new WeakMap<Task, string>();

/**
 * Which environment package each of a task's stand-ins (task.json `standins`) stood for when it was graded, and the
 * data it played on: `stand-in` where the task shows tasks/<library>/standins/<name> at lib/<name> (A2RL_ENV_PACKAGES,
 * full-task.ts), else the upstream package the runtime holds, by its distribution's name and version
 * (`name=upstream:dist@version`), then `;data=` and the first 12 hex of the sha256 of the task's assets manifest (every
 * data file's sha256). Part of the grader version (`Grader.version`), so a score played on the stand-in is never reused
 * for, nor ranked in one row with (src/reports/leaderboard.ts), one played on the upstream package or other data.
 * Empty for a task without stand-ins.
 */
export function environmentRecord(task: Task): string {
  const known = records.get(task);
  if (known !== undefined) return known;
  const shown = new Set(task.libraries.map((library) => library.name));
  const runtime = task.pythonRuntime.mounts.find((mount) => mount.target === fullTierRuntimeTarget)?.source;
  const packages = (task.tier === 'full' ? (task.standins ?? []) : []).map(
    (name) => `${name}=${shown.has(name) ? 'stand-in' : `upstream:${(runtime && upstreamPackage(runtime, name)) ?? 'unknown'}`}`,
  );
  const manifest = task.paths?.trainData ? join(task.paths.trainData, '..', 'manifest.json') : undefined;
  const data = packages.length && manifest && existsSync(manifest) ? `;data=${sha256(readFileSync(manifest)).slice(0, 12)}` : '';
  const record = `${packages.join(',')}${data}`;
  records.set(task, record);
  return record;
}
