import { join } from 'node:path';
import { contaminationChecker } from '../src/integrity/verdict.js';
import { keptResults } from '../src/reports/run-summaries.js';
import type { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { recordGrade } from './serve.js';

/**
 * Stores of many runs for the scale bench (bench/scale.ts) and its CI test (test/scale.test.ts): a few template runs
 * recorded through the store's own API with a real run's mix of rows (tool calls, resource samples, a training job,
 * graded submissions, a contamination check, the launcher's event, its baseline grade), then cloned row for row by
 * SQL (runs, events, jobs, submissions, checks, batches and kept summaries, with new run ids; foreign keys consistent) to the
 * size asked. The clones are the templates' rows, so every query meets what a store of that many such runs holds.
 */

export const templateCount = 8;
/** Tool calls of a template run (a real run's calls carry arguments and results of about this size). */
const toolCallsPerTemplate = 12;

/** Records the template runs, ended and checked, with the task's baseline grade; their ids. */
export function recordTemplateRuns(store: Store, home: string): string[] {
  const task = getTask('micro-gsm8k');
  const grade = (hash: string, score: number) => recordGrade(store, task, hash, score);
  grade(task.baseModelHash, 20);
  const ids: string[] = [];
  for (let r = 0; r < templateCount; r++) {
    const id = `template-${r}`;
    ids.push(id);
    const started = 1_700_000_000_000 + r * 1000;
    store.insertRun({
      id,
      task_id: task.id,
      label: `label-${r % 2}`,
      budget: JSON.stringify(task.defaultLimits),
      dir: join(home, 'runs', id),
      sandbox: 'bwrap',
      grader_version: task.graderVersion,
      owner: '0-0',
      created_at: started,
    });
    store.setRunAgent(id, { agent: `agent-${r % 4}`, agent_version: '1.0.0', driver_model: `model-${r % 2}` });
    store.setRunBatch(id, `batch-${r % 3}`);
    let t = 0;
    const event = (kind: string, name: string, data: unknown) =>
      store.insertEvent({ run_id: id, at: started + t, t_rel_ms: (t += 1000), kind, name, data: JSON.stringify(data) });
    event('agent', 'launched', {
      agent: `agent-${r % 4}`,
      batch: `batch-${r % 3}`,
      transcript: join(home, 'runs', id, 'transcript.jsonl'),
    });
    const jobId = r * 10 + 1;
    event('job', 'started', { job_id: jobId, kind: 'training', command: 'python3 code/train.py --lr 1e-3 --epochs 2', charged: true });
    for (let i = 0; i < toolCallsPerTemplate; i++) {
      event('tool', i % 2 ? 'job_status' : 'budget_status', {
        arguments: i % 2 ? { job_id: 'job-1' } : {},
        result: { state: 'running', elapsed_seconds: i, note: 'x'.repeat(400) },
        duration_ms: 3,
      });
      event('sample', 'resources', { job_id: jobId, cpu_s: i, cpu_percent: 100, memory_bytes: 1e8 });
    }
    event('job', 'finished', { job_id: jobId, kind: 'training', state: 'succeeded', exit_code: 0, charged: true, cpu_s: 30, gpu_s: 0 });
    for (let k = 1; k <= 2; k++) {
      const hash = `${id}-${k}`;
      const { inserted } = store.insertSubmissionWithin(5, {
        run_id: id,
        path: 'output/final',
        note: null,
        content_hash: hash,
        files: 2,
        bytes: 1000,
        created_at: started + t,
      }) as { inserted: { id: number } };
      const score = 15 + ((r * 7 + k * 13) % 20);
      grade(hash, score);
      store.setSubmissionState(inserted.id, 'graded', null, started + t);
      event('submission', 'queued', { submission_id: inserted.id, path: 'output/final' });
      event('submission', 'graded', { submission_id: inserted.id, public_score: score, private_score: score - 1 });
    }
    store.endRun(id, 'budget exhausted', started + t);
    store.insertIntegrityCheck({
      run_id: id,
      kind: 'contamination',
      verdict: r === templateCount - 1 ? 'flagged' : 'clean',
      checker: contaminationChecker,
      details: JSON.stringify({ matched: r === templateCount - 1 ? 3 : 0 }),
      duration_ms: 5,
      created_at: started + t,
    });
  }
  // Their summaries, kept as a server keeps them: the clones copy them too.
  keptResults(store);
  return ids;
}

/** The tables holding a run's rows, each copied with the clone's id (row ids are new). */
const runTables = ['events', 'jobs', 'submissions', 'integrity_checks', 'run_batches', 'run_summaries'] as const;

/** Grows the store to `total` runs by cloning the templates in turn; a clone starts a second after the one before. */
export function cloneRuns(store: Store, templates: readonly string[], total: number): void {
  const columns = (table: string) =>
    (store.db.prepare(`SELECT name FROM pragma_table_info('${table}')`).pluck().all() as string[]).filter((c) => c !== 'id');
  const runColumns = columns('runs');
  const insertRun = store.db.prepare(
    `INSERT INTO runs (id, ${runColumns.join(', ')}) SELECT @clone, ${runColumns
      .map((c) => (c === 'created_at' ? '@created_at' : c === 'ended_at' ? 'ended_at - created_at + @created_at' : c))
      .join(', ')} FROM runs WHERE id = @template`,
  );
  // A kept summary names its run in its result.
  const clonedSummary = `CASE WHEN json_extract(summary, '$.result') IS NULL THEN summary ELSE json_set(summary, '$.result.run_id', @clone) END`;
  const copies = runTables.map((table) => {
    const cols = table === 'run_summaries' ? ['run_id', ...columns(table).filter((c) => c !== 'run_id')] : columns(table);
    return store.db.prepare(
      `INSERT INTO ${table} (${cols.join(', ')}) SELECT ${cols.map((c) => (c === 'run_id' ? '@clone' : c === 'summary' ? clonedSummary : c)).join(', ')} FROM ${table} WHERE run_id = @template`,
    );
  });
  const existing = store.db.prepare('SELECT COUNT(*) FROM runs').pluck().get() as number;
  const base = 1_600_000_000_000;
  const batch = store.db.transaction((from: number, to: number) => {
    for (let n = from; n < to; n++) {
      const row = { clone: `clone-${n}`, template: templates[n % templates.length]!, created_at: base + n * 1000 };
      insertRun.run(row);
      for (const copy of copies) copy.run(row);
    }
  });
  // Commits of 10,000 runs: the log stays small.
  for (let from = existing; from < total; from += 10_000) batch(from, Math.min(total, from + 10_000));
}
