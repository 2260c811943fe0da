import { lookup } from '../../util/registry.js';
import { answersKind } from './answers.js';
import { executeKind } from './execute.js';
import { judgeKind } from './judge.js';
import type { GraderKind } from './kind.js';
import { scoreKind } from './score.js';

/** Grader kinds by the name a task.json gives in `grader.kind`. */
export const graderKinds: Readonly<Record<string, GraderKind>> = {
  score: scoreKind,
  execute: executeKind,
  judge: judgeKind,
  answers: answersKind,
};

export const graderKind = (name: string): GraderKind => lookup(graderKinds, name, 'grader kind');
