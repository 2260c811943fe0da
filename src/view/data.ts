import { baselineGradeOf, bestSubmission, gradedSubmissions } from '../core/submissions.js';
import { buildLeaderboard, type LeaderboardRow, runResults } from '../reports/leaderboard.js';
import { runIntegrity } from '../integrity/verdict.js';
import type { RunRow, Store } from '../store/store.js';
import type { BudgetLimits } from '../tasks/budget.js';
import type { DiskAccounts } from './disk.js';

/**
 * What the view's pages show, read from the store with the reports' own functions (baseline, best submission,
 * leaderboard): the view never computes a score differently from `a2rl report` and `a2rl leaderboard`.
 */

/** One budget line: used against its limit. */
export interface BudgetLine {
  name: 'wall' | 'compute' | 'episodes' | 'submissions' | 'disk';
  used: number;
  /** Null while the figure is not known yet (the disk account is measured in the background). */
  limit: number | null;
}

export interface RunSummary {
  id: string;
  task: string;
  agent: string | null;
  driver_model: string | null;
  label: string | null;
  /** The `a2rl run` batch the run was launched in, if it was. */
  batch: string | null;
  state: RunRow['state'];
  end_reason: string | null;
  created_at: number;
  budget: BudgetLine[];
  best_public: number | null;
  baseline_public: number | null;
  flags: string[];
}

/** What the launcher recorded of a run's agent: its batch and transcript. Written once, so kept once found. */
interface Launch {
  batch: string | null;
  transcript: string | null;
}

export type LeaderboardEntry = LeaderboardRow & { run_ids: string[] };

export class ViewData {
  private readonly launches = new Map<string, Launch>();
  private board?: { key: string; rows: LeaderboardEntry[] };

  constructor(
    readonly store: Store,
    readonly disk: DiskAccounts,
  ) {}

  /** The newest event's id: where a page's live stream starts. */
  lastEventId(): number {
    return (this.store.db.prepare('SELECT COALESCE(MAX(id), 0) AS id FROM events').get() as { id: number }).id;
  }

  runs(): RunSummary[] {
    return this.store
      .listRuns()
      .reverse()
      .map((row) => this.summary(row));
  }

  summaryOf(runId: string): RunSummary | undefined {
    const row = this.store.getRun(runId);
    return row && this.summary(row);
  }

  launchOf(runId: string): Launch {
    const known = this.launches.get(runId);
    if (known) return known;
    const event = this.store.db
      .prepare(`SELECT data FROM events WHERE run_id = ? AND kind = 'agent' AND name = 'launched' LIMIT 1`)
      .get(runId) as { data: string } | undefined;
    if (!event) return { batch: null, transcript: null };
    const data = JSON.parse(event.data) as { batch?: string; transcript?: string };
    const launch = { batch: data.batch ?? null, transcript: data.transcript ?? null };
    this.launches.set(runId, launch);
    return launch;
  }

  private summary(row: Readonly<RunRow>): RunSummary {
    const limits = JSON.parse(row.budget) as BudgetLimits;
    const usage = this.store.usage(row.id);
    const baseline = baselineGradeOf(this.store, row);
    const best = bestSubmission(gradedSubmissions(this.store, row));
    const wallSeconds = ((row.ended_at ?? Date.now()) - row.created_at) / 1000;
    const disk = this.disk.reading(row);
    // An ended run's verdict; its gain counts only when it is clean, as the leaderboard scores it.
    const integrity = row.state === 'ended' ? runIntegrity(this.store, row.id) : undefined;
    const flags = [
      ...(row.infrastructure_failure ? [`infrastructure failure: ${row.infrastructure_failure}`] : []),
      ...(row.state === 'ended' && row.end_reason ? [row.end_reason] : []),
      ...(integrity ? [integrity.contamination === 'unchecked' ? 'integrity: not checked yet' : `integrity: ${integrity.verdict}`] : []),
      ...(baseline ? [] : ['baseline not graded yet']),
      ...(best !== null && baseline && best.public > baseline.public_score && (integrity?.verdict ?? 'clean') === 'clean'
        ? ['beats baseline']
        : []),
    ];
    return {
      id: row.id,
      task: row.task_id,
      agent: row.agent,
      driver_model: row.driver_model,
      label: row.label,
      batch: this.launchOf(row.id).batch,
      state: row.state,
      end_reason: row.end_reason,
      created_at: row.created_at,
      budget: [
        { name: 'wall', used: wallSeconds, limit: limits.wallSeconds },
        { name: 'compute', used: usage.computeSeconds, limit: limits.computeSeconds },
        { name: 'episodes', used: usage.rolloutEpisodes, limit: limits.rolloutEpisodes },
        { name: 'submissions', used: usage.submissions, limit: limits.submissions },
        { name: 'disk', used: disk?.used ?? 0, limit: disk ? disk.limit : null },
      ],
      best_public: best?.public ?? null,
      baseline_public: baseline?.public_score ?? null,
      flags,
    };
  }

  /**
   * `a2rl leaderboard`'s rows, each with the runs behind it. Computed again only when a run ended, was marked an
   * infrastructure failure, a grade arrived or a check was recorded: its bootstrap costs milliseconds per row, and every open page asks.
   */
  leaderboard(): LeaderboardEntry[] {
    const key = JSON.stringify(
      this.store.db
        .prepare(
          `SELECT (SELECT COUNT(*) FROM runs WHERE state = 'ended') AS ended,
                  (SELECT COUNT(*) FROM runs WHERE infrastructure_failure IS NOT NULL) AS failed,
                  (SELECT COALESCE(MAX(rowid), 0) FROM grades) AS grades,
                  (SELECT COALESCE(MAX(id), 0) FROM integrity_checks) AS checks`,
        )
        .get(),
    );
    if (this.board?.key !== key) this.board = { key, rows: this.rankRuns() };
    return this.board.rows;
  }

  private rankRuns(): LeaderboardEntry[] {
    const results = runResults(this.store);
    return buildLeaderboard(results).map((row) => ({
      ...row,
      run_ids: results
        .filter(
          (r) => r.task === row.task && r.agent === row.agent && r.driver_model === row.driver_model && r.infrastructure_failure === null,
        )
        .map((r) => r.run_id),
    }));
  }
}
