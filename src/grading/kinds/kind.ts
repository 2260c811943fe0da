import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { SandboxBackend } from '../../../sandbox/contract.js';
import type { Task } from '../../tasks/task.js';
import { A2rlError } from '../../util/errors.js';
import { readTail } from '../../util/safe-fs.js';
import type { Judge } from '../judge/judge.js';

export const splits = ['public', 'private'] as const;
export type Split = (typeof splits)[number];

/** Per-split metrics of one grade; `score` is the 0–100 number the agent sees. */
export type Metrics = Record<Split, Record<string, number | string> & { score: number }>;

/** What phase two of a grading may use besides the grader's output. */
export interface ScoringContext {
  task: Task;
  /** The file the task's grader entry wrote. */
  outFile: string;
  /** Scratch space of this grading, removed after it. */
  outDir: string;
  backend: SandboxBackend;
  judge: Judge;
}

/**
 * How a grading turns the task's grader output into scores. Phase one (the task's grader
 * entry decoding the checkpoint in a sandbox) is the same for every kind; a kind names the
 * file that entry writes and does phase two.
 */
export interface GraderKind {
  /** The file name the grader entry is asked to write (`--out`). */
  outputFile: string;
  /** Whether grades depend on the judge, which then becomes part of the grader version. */
  judged: boolean;
  /** A version of what the server itself runs in phase two (code no task folder holds), part of the grader version. */
  serverPart?: string;
  score(context: ScoringContext): Promise<Metrics>;
}

/** Most bytes of a grader's output the server reads. */
const maxGraderOutputBytes = 64 * 2 ** 20;

/** One JSON object a line, each checked against `schema`; any bad line fails the grading. */
export function readItems<T extends z.ZodType>(file: string, schema: T): z.infer<T>[] {
  const text = readTail(file, maxGraderOutputBytes);
  if (text.truncated) throw new A2rlError('GRADING_FAILED', `the grader wrote more than ${maxGraderOutputBytes} bytes`);
  return text.text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      const parsed = schema.safeParse(parseJson(line));
      if (!parsed.success)
        throw new A2rlError('GRADING_FAILED', `the grader wrote an invalid line ${i + 1}: ${parsed.error.message.slice(0, 200)}`);
      return parsed.data;
    });
}

export function readJson(file: string): unknown {
  return parseJson(readFileSync(file, 'utf8'));
}

export const round = (x: number) => Math.round(x * 100) / 100;

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
