import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from './engine.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import type { RecordEvent } from '../store/events.js';
import type { Run } from './run.js';
import { discardSnapshot, snapshotDirectory } from '../store/submission-snapshots.js';
import type { RunRow, Store, SubmissionRow } from '../store/store.js';
import type { Task } from '../tasks/task.js';

export interface SubmissionView {
  submission_id: string;
  path: string;
  note: string | null;
  state: SubmissionRow['state'];
  /** Score on the public half of the evaluation set; null until graded. */
  score: number | null;
  /** The grader's other numbers on the public half (e.g. LC win rate, the judge). */
  metrics: Record<string, number | string> | null;
  error: string | null;
  content_hash: string;
  submitted_at_s: number;
  graded_at_s: number | null;
}

export const submissionId = (id: number) => `sub-${id}`;

/** Parses `sub-3` (or `3`); anything else is a clear error. */
export function parseSubmissionId(text: string): number {
  const match = /^(?:sub-)?(\d+)$/.exec(text.trim());
  if (!match) throw new A2rlError('INVALID_INPUT', `"${text}" is not a submission id; they look like sub-1. List yours with get_score.`);
  return Number(match[1]);
}

export function viewSubmission(run: Run, row: SubmissionRow): SubmissionView {
  const grade = row.state === 'graded' ? run.engine.grader.cached(run.task, row.content_hash) : undefined;
  return {
    submission_id: submissionId(row.id),
    path: row.path,
    note: row.note,
    state: row.state,
    score: grade?.public_score ?? null,
    metrics: grade ? publicMetrics(grade.details) : null,
    error: row.error,
    content_hash: row.content_hash.slice(0, 16),
    submitted_at_s: Math.round((row.created_at - run.row.created_at) / 1000),
    graded_at_s: row.graded_at === null ? null : Math.round((row.graded_at - run.row.created_at) / 1000),
  };
}

/** A grade's public-half numbers other than the score itself. */
export function publicMetrics(details: string): Record<string, number | string> {
  const { score: _, ...rest } = (JSON.parse(details) as { public?: Record<string, number | string> }).public ?? {};
  return rest;
}

export interface GradedSubmission {
  submission_id: string;
  public: number;
  private: number;
  metrics: Record<string, number | string>;
}

/** A run's graded submissions in order, with both scores. */
export function gradedSubmissions(store: Store, run: RunRow): GradedSubmission[] {
  return store.listSubmissions(run.id).flatMap((s) => {
    const grade = s.state === 'graded' ? store.getGrade(run.task_id, run.grader_version, s.content_hash) : undefined;
    return grade
      ? [
          {
            submission_id: submissionId(s.id),
            public: grade.public_score,
            private: grade.private_score,
            metrics: publicMetrics(grade.details),
          },
        ]
      : [];
  });
}

/** The submission with the best public score (the first of equals). */
export function bestSubmission(graded: GradedSubmission[]): GradedSubmission | null {
  return graded.reduce<GradedSubmission | null>((top, s) => (top === null || s.public > top.public ? s : top), null);
}

/**
 * Snapshots a checkpoint folder and queues it for grading. Identical content submitted
 * again returns the earlier submission (not graded twice, not counted twice). A refused
 * submission leaves nothing behind.
 */
export function submitArtifact(run: Run, path: string, note: string | undefined): { submission: SubmissionRow; duplicate: boolean } {
  run.assertCanStart('submission');
  const { engine, task } = run;
  const capReached = () =>
    new A2rlError(
      'BUDGET_EXHAUSTED',
      `All ${run.limits.submissions} submissions of this run are used. Your best score stands; read it with get_score.`,
    );
  // Checked before copying anything, and again atomically when the submission is inserted.
  if (run.budget().submissions.left <= 0) throw capReached();
  const target = run.workspace.resolve(path, 'read');
  if (!existsSync(target.hostPath)) {
    throw new A2rlError('NOT_FOUND', `${target.path} does not exist. Save your checkpoint (e.g. to output/final) and submit that folder.`);
  }
  if (!statSync(target.hostPath).isDirectory()) {
    throw new A2rlError(
      'INVALID_INPUT',
      `${target.path} is a file; submit the checkpoint folder that holds ${task.submission.requiredFiles.join(' and ')}.`,
    );
  }
  const snapshot = snapshotDirectory(target.hostPath, target.path, join(engine.home, 'submissions'), task.submission);
  if (snapshot.contentHash === task.baseModelHash) {
    discardSnapshot(snapshot);
    const baseline = engine.grader.cached(task, task.baseModelHash);
    throw new A2rlError(
      'INVALID_INPUT',
      `${target.path} is the base model unchanged${baseline ? ` (its score, the baseline, is ${baseline.public_score})` : ''}; submitting it is refused. Train it first.`,
    );
  }
  const outcome = engine.store.insertSubmissionWithin(run.limits.submissions, {
    run_id: run.id,
    path: target.path,
    note: note ?? null,
    content_hash: snapshot.contentHash,
    files: snapshot.files,
    bytes: snapshot.bytes,
    created_at: Date.now(),
  });
  if ('capReached' in outcome) {
    discardSnapshot(snapshot);
    throw capReached();
  }
  if ('existing' in outcome) {
    run.record('submission', 'duplicate', { submission_id: outcome.existing.id, path: target.path });
    return { submission: outcome.existing, duplicate: true };
  }
  run.record('submission', 'queued', {
    submission_id: outcome.inserted.id,
    path: target.path,
    content_hash: snapshot.contentHash,
    bytes: snapshot.bytes,
  });
  run.snapshotCode({ submission_id: outcome.inserted.id });
  startGrading(engine, task, run, outcome.inserted);
  return { submission: engine.store.getSubmission(outcome.inserted.id)!, duplicate: false };
}

/** Grades a stored submission snapshot and records the outcome; never throws. */
export function startGrading(
  engine: Engine,
  task: Task,
  run: { id: string; dir: string; record: RecordEvent },
  submission: SubmissionRow,
): void {
  const { store } = engine;
  void engine.grader
    .grade({
      task,
      contentHash: submission.content_hash,
      checkpointDir: join(engine.home, 'submissions', submission.content_hash),
      runId: run.id,
      runDir: run.dir,
      record: run.record,
      onStart: () => store.setSubmissionState(submission.id, 'grading', null, null),
    })
    .then(
      (grade) => {
        store.setSubmissionState(submission.id, 'graded', null, Date.now());
        run.record('submission', 'graded', {
          submission_id: submission.id,
          public_score: grade.public_score,
          private_score: grade.private_score,
        });
      },
      (error: unknown) => {
        const reason = isA2rlError(error) ? error.message : `grading failed: ${String(error)}`;
        store.setSubmissionState(submission.id, 'failed', reason, Date.now());
        run.record('submission', 'failed', { submission_id: submission.id, error: reason });
        engine.logger.warn({ run: run.id, submission: submission.id, err: error }, 'grading failed');
      },
    );
}
