import { join } from 'node:path';
import type { SandboxBackend } from '../../../sandbox/contract.js';
import type { Store } from '../../store/store.js';
import type { TaskFile, Tier } from '../../tasks/task.js';
import { A2rlError } from '../../util/errors.js';
import { lookup } from '../../util/registry.js';
import { graderKind } from '../kinds/index.js';
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

/**
 * The judges a judge-graded task of each tier may be graded by. The rubric judge knows only the micro tasks' constraints;
 * a full task's score is the paper's, which needs an LLM judge (issue 17: never a silent rubric).
 */
const judgesByTier: { readonly [T in Tier]: ReadonlyArray<JudgeConfig['kind']> } = {
  micro: judgeNames,
  full: ['llm'],
};

/** Refuses to start a judge-graded task with a judge its tier does not accept, saying how to start it instead. */
export function requireJudgeFor(task: TaskFile, judge: Pick<JudgeConfig, 'kind'>): void {
  if (!graderKind(task.grader.kind).judged || judgesByTier[task.tier].includes(judge.kind)) return;
  throw new A2rlError(
    'INVALID_INPUT',
    `${task.id} grades with an LLM judge: start it with --judge llm --judge-url URL --judge-model NAME (the rubric judge is for micro tasks)`,
  );
}
