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
import { getTask } from '../src/tasks.js';

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

async function gradingThroughput(home: string) {
  const task = getTask('micro-gsm8k');
  const store = new Store(join(home, 'grading-bench.sqlite'));
  const { logger } = createLogger();
  logger.level = 'warn';
  const backend = new BubblewrapBackend(`bench-${process.pid}`);
  const jobs = new JobManager(store, logger, `bench-${process.pid}`);
  const grader = new Grader(store, jobs, backend, new RubricJudge(backend, join(home, 'judging')), join(home, 'grading'), logger, 1);
  store.insertRun({
    id: 'bench',
    task_id: task.id,
    label: null,
    grader_version: 'test',
    owner: 'test',
    budget: '{}',
    dir: join(home, 'bench-run'),
    sandbox: 'bwrap',
    created_at: Date.now(),
  });
  const problems = ['public.jsonl', 'private.jsonl']
    .map((file) => readFileSync(join(task.paths.evalData, file), 'utf8').trim().split('\n').length)
    .reduce((a, b) => a + b, 0);
  const start = performance.now();
  const grade = await grader.grade({
    task,
    contentHash: task.baseModelHash,
    checkpointDir: task.paths.baseModel,
    runId: 'bench',
    runDir: join(home, 'bench-run'),
    record: () => undefined,
  });
  const seconds = (performance.now() - start) / 1000;
  store.close();
  return { problems, seconds: round(seconds), problems_per_second: round(problems / seconds, 1), baseline_public: grade.public_score };
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
  grading_throughput_micro_gsm8k: await gradingThroughput(home),
};
process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(packageRoot, 'bench', 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
