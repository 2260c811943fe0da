import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fullTierRuntimeTarget } from '../tasks/full-task.js';
import type { Task } from '../tasks/task.js';

const records = new WeakMap<Task, string>();

/**
 * Which environment package each of a task's stand-ins (task.json `standins`) stood for when it was graded: `stand-in`
 * where the task shows tasks/<library>/standins/<name> at lib/<name>, else the upstream package the runtime holds, by
 * its distribution's name and version (`name=upstream:dist@version`). Part of the grader version (`Grader.version`), so
 * a score played on the stand-in is never reused for, nor ranked in one row with, one played on the upstream package.
 * The data files' hashes are in the task's grader version already (the evaluation assets' manifest, full-task.ts).
 * Empty for a task without stand-ins.
 */
export function environmentRecord(task: Task): string {
  const known = records.get(task);
  if (known !== undefined) return known;
  const shown = new Set(task.libraries.map((library) => library.name));
  const runtime = task.pythonRuntime.mounts.find((mount) => mount.target === fullTierRuntimeTarget)?.source;
  const record = (task.tier === 'full' ? (task.standins ?? []) : [])
    .map((name) => `${name}=${shown.has(name) ? 'stand-in' : `upstream:${upstreamDistribution(runtime, name) ?? 'unknown'}`}`)
    .join(',');
  records.set(task, record);
  return record;
}

/** `dist@version` of the installed distribution that provides the import `name` (its dist-info's top_level.txt or RECORD). */
function upstreamDistribution(runtime: string | undefined, name: string): string | undefined {
  const libDir = runtime ? join(runtime, 'lib') : undefined;
  if (!libDir || !existsSync(libDir)) return undefined;
  for (const python of readdirSync(libDir)) {
    const site = join(libDir, python, 'site-packages');
    if (!existsSync(site)) continue;
    for (const entry of readdirSync(site).filter((e) => e.endsWith('.dist-info'))) {
      const info = join(site, entry);
      const provides = ['top_level.txt', 'RECORD']
        .filter((file) => existsSync(join(info, file)))
        .flatMap((file) => readFileSync(join(info, file), 'utf8').split('\n'))
        .map((line) => line.split(/[/,]/)[0]!.trim());
      if (!provides.includes(name)) continue;
      const metadata = existsSync(join(info, 'METADATA')) ? readFileSync(join(info, 'METADATA'), 'utf8') : '';
      const field = (key: string) => new RegExp(`^${key}: *(.+)$`, 'm').exec(metadata)?.[1]?.trim();
      return `${field('Name') ?? entry.replace(/-[^-]*\.dist-info$/, '')}@${field('Version') ?? 'unknown'}`;
    }
  }
  return undefined;
}
