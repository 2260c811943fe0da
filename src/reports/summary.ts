import type { Store } from '../store/store.js';
import { baselineGradeOf, bestSubmission, type GradedSubmission, gradedSubmissions } from '../core/submissions.js';
import { getTaskFile } from '../tasks/task.js';
import { type RunIntegrity, runIntegrity } from '../integrity/verdict.js';

export interface ScorePair {
  public: number;
  private: number;
}

export interface RunSummary {
  run_id: string;
  task: string;
  level: number;
  metric: string;
  label: string | null;
  state: string;
  end_reason: string | null;
  /** Why the run's infrastructure failed, when it did: then its scores are not the agent's result. */
  infrastructure_failure: string | null;
  /** The integrity checks' verdicts: a flagged run's score may not have been earned. */
  integrity: RunIntegrity;
  baseline: ScorePair | null;
  /** The submission with the best public score, with its private score: the run's final result. */
  best: GradedSubmission | null;
  last: GradedSubmission | null;
  improvement: ScorePair | null;
  submissions: number;
  failed_submissions: number;
  compute_seconds: number;
  rollout_episodes: number;
  wall_seconds: number;
  /** What held the run to its disk quota: `kernel` (its own filesystem) or `walk (why)`; null for runs from before it was recorded. */
  disk_quota_by: string | null;
}

/** The facts of one run from the store alone (what the final report and the demo print). */
export function summarizeRun(store: Store, runId: string): RunSummary {
  const run = store.getRun(runId);
  if (!run) throw new Error(`no run ${runId} in ${store.path}`);
  const task = getTaskFile(run.task_id);
  const baselineGrade = baselineGradeOf(store, run);
  const graded = gradedSubmissions(store, run);
  const best = bestSubmission(graded);
  const baseline = baselineGrade ? { public: baselineGrade.public_score, private: baselineGrade.private_score } : null;
  const submissions = store.listSubmissions(runId);
  const round = (x: number) => Math.round(x * 100) / 100;
  const usage = store.usage(runId);
  return {
    run_id: runId,
    task: task.id,
    level: task.level,
    metric: task.metric,
    label: run.label,
    state: run.state,
    end_reason: run.end_reason,
    infrastructure_failure: run.infrastructure_failure,
    integrity: runIntegrity(store, runId),
    baseline,
    best,
    last: graded.at(-1) ?? null,
    improvement:
      best && baseline ? { public: round(best.public - baseline.public), private: round(best.private - baseline.private) } : null,
    submissions: submissions.length,
    failed_submissions: submissions.filter((s) => s.state === 'failed').length,
    compute_seconds: round(usage.computeSeconds),
    rollout_episodes: usage.rolloutEpisodes,
    wall_seconds: round(((run.ended_at ?? Date.now()) - run.created_at) / 1000),
    disk_quota_by: diskQuotaBy(store, runId),
  };
}

/** The run's `run/storage` event, as the report says it (docs/ARCHITECTURE.md, invariant 14). */
function diskQuotaBy(store: Store, runId: string): string | null {
  const event = store.listEvents(runId, 'run').find((e) => e.name === 'storage');
  if (!event) return null;
  const storage = JSON.parse(event.data) as { enforcement: string; reason?: string };
  return storage.reason ? `${storage.enforcement} (${storage.reason})` : storage.enforcement;
}
