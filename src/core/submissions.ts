import { join } from 'node:path';
import type { RecordEvent } from '../store/events.js';
import type { GradeRow, RunRow, Store, SubmissionRow } from '../store/store.js';
import { getTask, type Task } from '../tasks/task.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import type { RunServices } from './services.js';

export const submissionId = (id: number) => `sub-${id}`;

/** Parses `sub-3` (or `3`); anything else is a clear error. */
export function parseSubmissionId(text: string): number {
  const match = /^(?:sub-)?(\d+)$/.exec(text.trim());
  if (!match) throw new A2rlError('INVALID_INPUT', `"${text}" is not a submission id; they look like sub-1. List yours with get_score.`);
  return Number(match[1]);
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
/** The run's baseline: its base model's grade under the run's grader version. */
export function baselineGradeOf(store: Store, run: RunRow): GradeRow | undefined {
  // Runs created before base_model_hash was recorded are micro runs: their task's model is the base.
  return store.getGrade(run.task_id, run.grader_version, run.base_model_hash ?? getTask(run.task_id).baseModelHash);
}

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

/** Grades a stored submission snapshot and records the outcome; never throws. */
export function startGrading(
  services: RunServices,
  task: Task,
  run: { id: string; dir: string; record: RecordEvent },
  submission: SubmissionRow,
): void {
  const { store } = services;
  void services.grader
    .grade({
      task,
      contentHash: submission.content_hash,
      checkpointDir: join(services.home, 'submissions', submission.content_hash),
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
        // Cut off or never started by a server that stopped grading: left unfinished, for a later server to grade.
        if (services.grader.stopped) return;
        const reason = isA2rlError(error) ? error.message : `grading failed: ${String(error)}`;
        store.setSubmissionState(submission.id, 'failed', reason, Date.now());
        run.record('submission', 'failed', { submission_id: submission.id, error: reason });
        services.logger.warn({ run: run.id, submission: submission.id, err: error }, 'grading failed');
      },
    )
    // A grading's end the store cannot take (full, or closed under a stopping server's late grading): to the log, never
    // an unhandled rejection.
    .catch((error: unknown) =>
      services.logger.error({ run: run.id, submission: submission.id, err: error }, "a grading's end could not be recorded"),
    );
}
