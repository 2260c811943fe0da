import { baselineGradeOf, bestSubmission, gradedSubmissions } from '../core/submissions.js';
import { environmentOf } from '../grading/grader-version.js';
import { runIntegrity, type RunVerdict } from '../integrity/verdict.js';
import type { RunRow, RunSummaryRow, Store, SummaryInputs } from '../store/store.js';
import { getTaskFile } from '../tasks/task.js';
import { runUsage, totalTokens } from '../transcripts/run-usage.js';
import { startProgress } from '../util/progress.js';

/**
 * Per-run summaries, kept (issue 49): what the runs page, `runs list` and the leaderboard show of a run, computed once
 * from its submissions, grades, checks and transcript (8 queries, a transcript read, a verdict's JSON) and kept in the
 * store's `run_summaries`. The store deletes a run's row whenever something it says changes (the run ends, is graded,
 * checked, marked, or its task's baseline is graded), and whoever reads it next writes it again: at 10⁵ runs a page
 * reads 100 rows, the leaderboard reads rows, not runs. Only a settled run's summary is kept (ended, no job running, no
 * submission queued or grading: until then it changes by the second), and only if nothing it says changed while it was
 * computed (Store.putRunSummaries): readers on other connections (the view worker, CLIs) never keep a stale one.
 */

/** Summaries kept a transaction by {@link summariseEndedRuns}: the agents' thread waits behind one write lock per 500, not per run. */
const keptPerCommit = 500;

/** A run's result on the leaderboard (see docs/ARCHITECTURE.md, "Scores"). */
export interface RunResult {
  run_id: string;
  agent: string;
  driver_model: string;
  task: string;
  final: number;
  baseline: number;
  improvement: number;
  success: boolean;
  /** Set when the run's infrastructure failed: counted apart, never in the scores. */
  infrastructure_failure: string | null;
  /** The run's integrity (src/integrity/verdict.ts): a run that is not `clean` (flagged, or its check incomplete) is scored as `--flagged` says. */
  integrity: RunVerdict;
  /** The agent's input and output tokens, and its dollars, from its transcript; null where it does not say (never 0). */
  tokens: number | null;
  cost_usd: number | null;
}

/** What a kept summary says of its run. */
export interface RunFigures {
  batch: string | null;
  compute_s: number;
  episodes: number;
  submissions: number;
  /** Bytes it put in the server's shared stores (Store.storedBytes). */
  stored_bytes: number;
  best_public: number | null;
  baseline_public: number | null;
  /** The latest contamination check's verdict, `unchecked` before one. */
  contamination: string;
  verdict: RunVerdict;
  /** Its leaderboard result; null for a run no agent worked in, or without a baseline grade yet. */
  result: RunResult | null;
}

/**
 * A benchmark run: an agent worked in it. A run no tool was called in that `a2rl run` did not
 * launch is a client's health check (`claude mcp list` starts `serve --task` and leaves), not a result.
 */
export function isBenchmarkRun(store: Store, run: RunRow): boolean {
  return store.hasEvent(run.id, 'tool') || store.hasEvent(run.id, 'agent', 'launched');
}

/** Computes a run's figures from the store (and its transcript): what a kept summary holds. */
export function computeFigures(store: Store, run: Readonly<RunRow>): RunFigures {
  const usage = store.usage(run.id);
  const baseline = baselineGradeOf(store, run);
  const best = bestSubmission(gradedSubmissions(store, run));
  const integrity = runIntegrity(store, run.id);
  let result: RunResult | null = null;
  if (baseline && run.state === 'ended' && isBenchmarkRun(store, run)) {
    const final = best?.private ?? baseline.private_score;
    const improvement = final - baseline.private_score;
    const agentUsage = runUsage(store, run.id);
    const tokens = totalTokens(agentUsage);
    result = {
      run_id: run.id,
      agent: run.agent ?? run.label ?? 'unlabelled',
      driver_model: run.driver_model ?? '–',
      task: run.task_id,
      final,
      baseline: baseline.private_score,
      improvement,
      success: improvement >= getTaskFile(run.task_id).successMargin,
      infrastructure_failure: run.infrastructure_failure,
      integrity: integrity.verdict,
      tokens: tokens === 'unknown' ? null : tokens,
      cost_usd: agentUsage.cost_usd === 'unknown' ? null : agentUsage.cost_usd,
    };
  }
  return {
    batch: store.batchOf(run.id),
    compute_s: usage.computeSeconds,
    episodes: usage.rolloutEpisodes,
    submissions: usage.submissions,
    stored_bytes: store.storedBytes(run.id),
    best_public: best?.public ?? null,
    baseline_public: baseline?.public_score ?? null,
    contamination: integrity.contamination,
    verdict: integrity.verdict,
    result,
  };
}

/** A run's summary row, computed now, with the inputs it was computed from (read first). */
function summarise(store: Store, listed: Readonly<RunRow>): { row: RunSummaryRow; inputs: SummaryInputs } {
  const inputs = store.summaryInputs(listed);
  // Read again after its inputs: a change since the run was listed is then either seen here or refuses the keep.
  const run = store.getRun(listed.id) ?? listed;
  const figures = computeFigures(store, run);
  const row: RunSummaryRow = {
    run_id: run.id,
    task_id: run.task_id,
    benchmark: figures.result !== null || isBenchmarkRun(store, run) ? 1 : 0,
    has_baseline: figures.baseline_public === null ? 0 : 1,
    summary: JSON.stringify(figures),
    written_at: Date.now(),
  };
  return { row, inputs };
}

/** The figures of these runs: ended runs' kept (the missing written now, in one transaction), active runs' computed now. */
export function runFigures(store: Store, runs: ReadonlyArray<Readonly<RunRow>>): Map<string, RunFigures> {
  const ended = runs.filter((run) => run.state === 'ended');
  const kept = store.runSummaries(ended.map((run) => run.id));
  const written = ended.filter((run) => !kept.has(run.id)).map((run) => summarise(store, run));
  if (written.length > 0) store.putRunSummaries(written);
  for (const { row } of written) kept.set(row.run_id, row);
  return new Map(
    runs.map((run) => [
      run.id,
      run.state === 'active' ? computeFigures(store, run) : (JSON.parse(kept.get(run.id)!.summary) as RunFigures),
    ]),
  );
}

/**
 * Writes the summaries ended runs (of one task, or all) lack: from before summaries were kept, or changed since. Once
 * each, {@link keptPerCommit} a transaction. The figures of those not kept (not settled yet, or changed while computed)
 * are returned.
 */
export function summariseEndedRuns(store: Store, task?: string): RunFigures[] {
  const missing = store.endedRunsWithoutSummary(task);
  const progress = startProgress('summarising runs', missing.length);
  const unsettled: RunFigures[] = [];
  try {
    for (let start = 0; start < missing.length; start += keptPerCommit) {
      const batch = missing.slice(start, start + keptPerCommit).map((run) => {
        progress.tick(run.id);
        return summarise(store, run);
      });
      store.putRunSummaries(batch);
      const kept = store.runSummaries(batch.map(({ row }) => row.run_id));
      for (const { row } of batch) if (!kept.has(row.run_id)) unsettled.push(JSON.parse(row.summary) as RunFigures);
    }
  } finally {
    progress.stop();
  }
  return unsettled;
}

/**
 * {@link summariseEndedRuns} for a process that answers others meanwhile (the view's): one transaction of
 * {@link keptPerCommit} at a time, the event loop free between them (an upgraded store of 10⁵ runs takes a minute).
 */
export async function summariseEndedRunsYielding(store: Store, task?: string): Promise<void> {
  const missing = store.endedRunsWithoutSummary(task);
  for (let start = 0; start < missing.length; start += keptPerCommit) {
    store.putRunSummaries(missing.slice(start, start + keptPerCommit).map((run) => summarise(store, run)));
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** A run's leaderboard result and the environment it was graded in (src/grading/grader-version.ts). */
export type EnvironmentResult = RunResult & { environment?: string };

/**
 * Ended benchmark runs' results (of one task, or all), from their kept summaries, each with the environment it was
 * graded in (its run's grader version, read with the summary); runs without a baseline grade yet are left out.
 */
export function keptResults(store: Store, task?: string): EnvironmentResult[] {
  // Ended runs not settled yet (a job stopping, a submission grading) count with their figures as of now, after the rest.
  const unsettled = summariseEndedRuns(store, task).flatMap(({ result }) =>
    result ? [{ ...result, environment: environmentOf(store.getRun(result.run_id)?.grader_version ?? '') }] : [],
  );
  // One another connection kept meanwhile is counted once.
  const counted = new Set(unsettled.map((result) => result.run_id));
  const results: EnvironmentResult[] = [];
  for (const row of store.iterateRankedSummaries(task)) {
    const { result } = JSON.parse(row.summary) as RunFigures;
    if (result && !counted.has(result.run_id)) results.push({ ...result, environment: environmentOf(row.grader_version) });
  }
  return [...results, ...unsettled];
}
