import { join } from 'node:path';
import type { SandboxBackend } from '../../../sandbox/contract.js';
import type { Store } from '../../store/store.js';
import { lookup } from '../../util/registry.js';
import type { Judge } from './judge.js';
import { LlmJudge, type LlmJudgeOptions } from './llm.js';
import { RubricJudge } from './rubric.js';

/** Which judge grades judge-graded tasks, with its settings (`serve --judge rubric|llm`). */
export type JudgeConfig = { kind: 'rubric' } | ({ kind: 'llm' } & LlmJudgeOptions);

/** What a judge may be built from. */
export interface JudgeContext {
  store: Store;
  backend: SandboxBackend;
  home: string;
}

type JudgeFactory<K extends JudgeConfig['kind']> = (config: Extract<JudgeConfig, { kind: K }>, context: JudgeContext) => Judge;

/** Judges by the name `--judge` takes. */
export const judges: { readonly [K in JudgeConfig['kind']]: JudgeFactory<K> } = {
  rubric: (_config, { backend, home }) => new RubricJudge(backend, join(home, 'judging')),
  llm: (config, { store }) => new LlmJudge(store, config),
};

export const judgeNames = Object.keys(judges) as JudgeConfig['kind'][];

export function createJudge(config: JudgeConfig, context: JudgeContext): Judge {
  const factory = lookup<JudgeFactory<JudgeConfig['kind']>>(judges as never, config.kind, 'judge');
  return factory(config as never, context);
}
