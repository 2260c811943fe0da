import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { JobKind, JobRow, Store } from '../../src/store/store.js';

/** What a test's job is: its run and log folder, and where it differs from a plain training job started now. */
interface TestJob {
  runId: string;
  logDir: string;
  kind?: JobKind;
  command?: string;
  /** Default: 1, as every job but a grading is. */
  charged?: number;
  /** Default: now. */
  createdAt?: number;
  /** What its log holds once it started: none written when not given. */
  log?: string;
}

/** A job as the job manager records one when it starts (running, no resources asked), its log written with `log`. */
export function startedJob(
  store: Store,
  { runId, logDir, kind = 'training', command = 'python3 train.py', charged = 1, createdAt, log }: TestJob,
): JobRow {
  const job = store.insertJob(
    {
      run_id: runId,
      kind,
      command,
      resources: '{}',
      charged,
      episodes_requested: 0,
      owner: '0-0',
      created_at: createdAt ?? Date.now(),
    },
    logDir,
  );
  if (log !== undefined) {
    mkdirSync(dirname(job.log_path), { recursive: true });
    writeFileSync(job.log_path, log);
  }
  return job;
}

/** The job's end as the job manager records one that succeeded: exit 0 at `endedAt`, after one CPU-second. */
export function succeeded(store: Store, jobId: number, endedAt: number): void {
  store.finishJob(jobId, {
    state: 'succeeded',
    reason: null,
    exit_code: 0,
    signal: null,
    cpu_s: 1,
    gpu_s: 0,
    episodes_done: null,
    result: null,
    ended_at: endedAt,
  });
}
