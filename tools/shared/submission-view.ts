import { publicMetrics, submissionId } from '../../src/core/submissions.js';
import type { Run } from '../../src/core/run.js';
import type { SubmissionRow } from '../../src/store/store.js';

/** A submission as the agent sees it: public-half figures only, times relative to the run's start. */
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

export function viewSubmission(run: Run, row: SubmissionRow): SubmissionView {
  const grade = row.state === 'graded' ? run.cachedGrade(row.content_hash) : undefined;
  return {
    // Its number in the run: the store's own id would tell of other runs.
    submission_id: submissionId(row.seq),
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
