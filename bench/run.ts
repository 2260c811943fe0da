/**
 * Reproducible benchmarks of the server: `npm run bench` prints them as JSON and records
 * them, with the machine they ran on, in bench/results.json.
 */
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { mkdtempSync } from 'node:fs';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import { connectStdio } from '../src/client.js';
import { Grader } from '../src/grading.js';
import { JobManager } from '../src/jobs.js';
import { RubricJudge } from '../src/judge/rubric.js';
import { createLogger } from '../src/logger.js';
import { packageRoot } from '../src/paths.js';
import { Store } from '../src/store.js';
import { getTask, listTaskIds } from '../src/tasks.js';
import { executePrograms } from '../src/execution.js';

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

async function budgetStatusRoundTrip(home: string, calls: number) {
  const { client } = await connectStdio({ task: 'micro-gsm8k', home, stderr: 'ignore', clientName: 'a2rl-bench' });
  try {
    for (let i = 0; i < 20; i++) await client.callTool({ name: 'budget_status', arguments: {} });
    const times: number[] = [];
    for (let i = 0; i < calls; i++) {
      const start = performance.now();
      await client.callTool({ name: 'budget_status', arguments: {} });
      times.push(performance.now() - start);
    }
    times.sort((a, b) => a - b);
    return { calls, p50_ms: round(percentile(times, 50)), p99_ms: round(percentile(times, 99)) };
  } finally {
    await client.close();
  }
}

async function sandboxStart(runs: number) {
  const workspace = mkdtempSync(join(tmpdir(), 'a2rl-bench-ws-'));
  const sandbox = await new BubblewrapBackend(`bench-${process.pid}`).create({
    name: 'bench',
    mounts: [{ source: workspace, target: '/workspace', readOnly: false }],
    hidden: [],
    env: {},
    workdir: '/workspace',
  });
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const fd = openSync('/dev/null', 'w');
    const start = performance.now();
    const job = sandbox.exec({
      command: ['true'],
      limits: { cpus: 1, memoryBytes: 256 * 2 ** 20, pids: 16, gpus: [] },
      output: fd,
      tag: `bench-${i}`,
    });
    closeSync(fd);
    const status = await job.exited;
    times.push(performance.now() - start);
    if (status.exitCode !== 0) throw new Error(`true exited with ${status.exitCode}`);
  }
  times.sort((a, b) => a - b);
  return { runs, p50_ms: round(percentile(times, 50)), p99_ms: round(percentile(times, 99)) };
}

/** Grading of each task's base model from scratch: phase one and, by kind, execution or judging. */
async function gradingThroughput(home: string, taskId: string) {
  const task = getTask(taskId);
  const store = new Store(join(home, `grading-${taskId}.sqlite`));
  const { logger } = createLogger();
  logger.level = 'warn';
  const backend = new BubblewrapBackend(`bench-${process.pid}`);
  const jobs = new JobManager(store, logger, `bench-${process.pid}`);
  const grader = new Grader(store, jobs, backend, new RubricJudge(backend, join(home, 'judging')), join(home, 'grading'), logger, 1);
  const runDir = join(home, `bench-run-${taskId}`);
  store.insertRun({
    id: 'bench',
    task_id: task.id,
    label: null,
    budget: '{}',
    dir: runDir,
    sandbox: 'bwrap',
    grader_version: grader.version(task),
    owner: 'bench',
    created_at: Date.now(),
  });
  const items = ['public.jsonl', 'private.jsonl']
    .map((file) => readFileSync(join(task.paths.evalData, file), 'utf8').trim().split('\n').length)
    .reduce((a, b) => a + b, 0);
  const start = performance.now();
  const grade = await grader.grade({
    task,
    contentHash: task.baseModelHash,
    checkpointDir: task.paths.baseModel,
    runId: 'bench',
    runDir,
    record: () => undefined,
  });
  const seconds = (performance.now() - start) / 1000;
  store.close();
  return { items, seconds: round(seconds), items_per_second: round(items / seconds, 1), baseline_public: grade.public_score };
}

/** What running one model-written program in a sandbox of its own costs. */
async function programSandboxOverhead(home: string, programs: number) {
  const task = getTask('micro-humaneval');
  const items = Array.from({ length: programs }, (_, i) => ({
    id: String(i),
    split: 'public' as const,
    program: 'def f(x):\n    return x + 1\n',
    entry_point: 'f',
    calls: [[1], [2], [3], [4], [5]],
    expected: [2, 3, 4, 5, 6],
  }));
  const start = performance.now();
  const results = await executePrograms(new BubblewrapBackend(`bench-${process.pid}`), task, items, join(home, 'programs'));
  const seconds = (performance.now() - start) / 1000;
  if (results.some((r) => r.passed !== 5)) throw new Error('a trivial program failed its tests');
  return {
    programs,
    concurrency: task.grader.execution!.concurrency,
    seconds: round(seconds),
    ms_per_program: round((1000 * seconds) / programs, 1),
  };
}

async function sequential<T, R>(inputs: T[], f: (input: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (const input of inputs) out.push(await f(input));
  return out;
}

const home = mkdtempSync(join(tmpdir(), 'a2rl-bench-'));
const results = {
  machine: {
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? 'unknown',
    memory_gib: round(totalmem() / 2 ** 30, 1),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
  },
  measured_at: new Date().toISOString(),
  budget_status_round_trip_stdio: await budgetStatusRoundTrip(home, 1000),
  sandbox_start_exec_true_bwrap: await sandboxStart(100),
  grading_throughput: Object.fromEntries(await sequential(listTaskIds(), async (id) => [id, await gradingThroughput(home, id)] as const)),
  program_sandbox_micro_humaneval: await programSandboxOverhead(home, 60),
};
process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(packageRoot, 'bench', 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
