import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import pLimit from 'p-limit';
import { z } from 'zod';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { runOnce } from './run-once.js';
import { asMicroTask, type Task } from '../tasks/task.js';

/** A program to test: written by the model, so untrusted. Expected outputs never enter its sandbox. */
export const executionItemSchema = z.object({
  id: z.string(),
  split: z.enum(['public', 'private']),
  program: z.string(),
  entry_point: z.string(),
  calls: z.array(z.array(z.unknown())),
  expected: z.array(z.unknown()),
});

export type ExecutionItem = z.infer<typeof executionItemSchema>;

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

/**
 * Runs each program in a fresh sandbox of its own: no network, nothing mounted but the
 * program with its test inputs and the task's runner, its own memory, process and time
 * limits. The runner prints the outputs; they are compared here with the expected values,
 * which the program never sees, so no program can report a pass it did not earn. An
 * infinite loop, a fork bomb or a huge allocation costs that problem only.
 */
export async function executePrograms(
  backend: SandboxBackend,
  task: Task,
  items: ExecutionItem[],
  scratchDir: string,
): Promise<ExecutionResult[]> {
  const limits = task.grader.execution;
  if (!limits) throw new Error(`task ${task.id} declares no execution limits`);
  const limit = pLimit(limits.concurrency);
  return Promise.all(items.map((item, index) => limit(() => executeOne(backend, task, item, join(scratchDir, `program-${index}`)))));
}

async function executeOne(backend: SandboxBackend, anyTask: Task, item: ExecutionItem, dir: string): Promise<ExecutionResult> {
  const task = asMicroTask(anyTask, 'Running programs against test calls');
  const limits = task.grader.execution!;
  const total = item.expected.length;
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, 'item.json'), JSON.stringify({ program: item.program, entry_point: item.entry_point, calls: item.calls }));
    const result = await runOnce(backend, {
      name: `exec-${task.id}`,
      mounts: [
        { source: dir, target: `${root}/item`, readOnly: true },
        { source: task.paths.env, target: `${root}/lib/${task.env.package}`, readOnly: true },
      ],
      // A fixed hash seed keeps set and dict order, and so outputs, the same on every run.
      env: { PYTHONPATH: `${root}/lib`, PYTHONDONTWRITEBYTECODE: '1', PYTHONHASHSEED: '0' },
      workdir: '/tmp',
      argv: ['/usr/bin/python3', '-m', `${task.env.package}.execute`, `${root}/item/item.json`],
      limits: { cpus: 1, memoryBytes: limits.memoryMb * 2 ** 20, pids: limits.pids, gpus: [] },
      timeoutMs: limits.timeoutSeconds * 1000,
      captureBytes: 1 << 20,
    });
    const line = result.output
      .split('\n')
      .reverse()
      .find((l) => l.startsWith(outputMarker));
    const outputs = line ? outputSchema.safeParse(parseJson(line.slice(outputMarker.length))) : undefined;
    if (!outputs?.success) {
      const why = result.timedOut
        ? 'timed out'
        : result.oomKilled
          ? 'out of memory'
          : `no outputs (exit ${result.exitCode ?? result.signal})`;
      return { id: item.id, split: item.split, passed: 0, total, failure: why };
    }
    const passed = item.expected.filter(
      (expected, i) => outputs.data[i]?.ok === true && isDeepStrictEqual(outputs.data[i]!.value, expected),
    ).length;
    return { id: item.id, split: item.split, passed, total };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
