/**
 * A grader version's parts (`Grader.version`): the task's grader first, then each part named by its prefix
 * (`runner:`, `search:`, `env:`, `judge:`). One parser for the server that refuses a run graded otherwise
 * (src/core/engine.ts) and the leaderboard that never mixes environments in a row (src/reports/leaderboard.ts).
 */

/** The parts' names, in the order `Grader.version` writes them. */
export const graderVersionPartNames = ['grader', 'runner', 'search', 'env', 'judge'] as const;
export type GraderVersionPart = (typeof graderVersionPartNames)[number];

const named = new Set<string>(graderVersionPartNames);

/** Each part of a grader version by its name, prefix included (`env:…`); the first is the task's grader. */
export function graderVersionParts(version: string): Map<GraderVersionPart, string> {
  const found = new Map<GraderVersionPart, string>();
  let last: GraderVersionPart = 'grader';
  // A part runs up to the next named one: a judge's name may hold a '/' (its annotator).
  for (const [index, part] of version.split('/').entries()) {
    const key = index === 0 ? 'grader' : /^([a-z]+):/.exec(part)?.[1];
    if (key !== undefined && named.has(key)) found.set((last = key as GraderVersionPart), part);
    else found.set(last, `${found.get(last)}/${part}`);
  }
  return found;
}

/**
 * The environment a run was graded in: the `env:` part without its prefix (the environment packages, stand-in or
 * upstream, and the data's hash: src/grading/environment.ts); '' for a task without stand-ins.
 */
export function environmentOf(graderVersion: string): string {
  return graderVersionParts(graderVersion).get('env')?.slice('env:'.length) ?? '';
}
