import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { contaminationChecker } from '../../src/integrity/verdict.js';
import { type IntegrityVerdict, Store } from '../../src/store/store.js';

/**
 * Records a contamination check's verdict for a run a test wrote into its store, as the check process records one:
 * a seeded run with no check reads `incomplete` (never clean), so a test that ranks seeded runs says what they are.
 */
export function recordCheckVerdict(store: Store, runId: string, verdict: IntegrityVerdict = 'clean'): void {
  const coverage = { files: 1, bytes: 100, unread: [], unread_bytes: 0, unread_share: 0 };
  store.insertIntegrityCheck({
    run_id: runId,
    kind: 'contamination',
    verdict,
    checker: contaminationChecker,
    details: JSON.stringify({ matched: 0, coverage }),
    duration_ms: 1,
    created_at: Date.now(),
  });
}

/**
 * One ended run of `taskId` in `home` (a fresh store there) whose workspace is empty: what a test plants is all the run
 * wrote, and the contamination check reads it.
 */
export function freshRun(
  taskId: string,
  home: string,
  baseModel?: string,
): { home: string; store: Store; runId: string; workspace: string } {
  const store = new Store(join(home, 'store.sqlite'));
  const runId = `run-${taskId}`;
  const dir = join(home, 'runs', runId);
  mkdirSync(join(dir, 'workspace', 'code'), { recursive: true });
  store.insertRun({
    id: runId,
    task_id: taskId,
    label: 'planted',
    budget: '{}',
    dir,
    sandbox: 'bwrap',
    grader_version: 'test',
    owner: 'none',
    created_at: Date.now(),
    ...(baseModel ? { base_model: baseModel } : {}),
  });
  store.endRun(runId, 'test', Date.now());
  return { home, store, runId, workspace: join(dir, 'workspace') };
}

/** The lines of a task's evaluation set, public half then private, in the order of the files (the hidden items' order). */
export function evalLines(evalDir: string): string[] {
  return ['public', 'private'].flatMap((half) =>
    readFileSync(join(evalDir, `${half}.jsonl`), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== ''),
  );
}
