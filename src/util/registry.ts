import { A2rlError } from './errors.js';

/**
 * The entry of an extension registry (sandbox backends, judges, grader kinds) under `name`;
 * an unknown name is an error that lists the known ones.
 */
export function lookup<T>(registry: Readonly<Record<string, T>>, name: string, what: string): T {
  if (!Object.hasOwn(registry, name)) {
    throw new A2rlError('INVALID_INPUT', `Unknown ${what} "${name}"; known: ${Object.keys(registry).join(', ')}.`);
  }
  return registry[name]!;
}
