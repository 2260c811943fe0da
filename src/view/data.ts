import type Database from 'better-sqlite3';
import { buildLeaderboard, type LeaderboardRow, runResults } from '../reports/leaderboard.js';
import { type RunFigures, runFigures } from '../reports/run-summaries.js';
import type { RunCursor, RunFilter, RunRow, Store } from '../store/store.js';
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

/** Runs a page of the runs page shows at most; older ones are on the next page (keyset: `before=<created_at>:<id>`). */
export const runsPerPage = 100;

export class ViewData {
  private readonly launches = new Map<string, Launch>();
  private board?: { key: string; rows: LeaderboardEntry[] };
  private launchQuery?: Database.Statement;
  private boardKeyQuery?: Database.Statement;

  constructor(
    readonly store: Store,
    readonly disk: DiskAccounts,
  ) {}

  /** The newest event's id: where a page's live stream starts. */
  lastEventId(): number {
    return (this.store.db.prepare('SELECT COALESCE(MAX(id), 0) AS id FROM events').get() as { id: number }).id;
  }

  /**
   * A page of runs, newest first, filtered in SQL (each filter an index search), from their kept summaries: the same
   * cost at 10 runs as at 10⁵. `next`: where the following page starts, when there is one.
   */
  runs(filter: RunFilter, before?: RunCursor): { rows: RunSummary[]; next?: RunCursor } {
    const rows = this.store.pageOfRuns(filter, runsPerPage + 1, before);
    const shown = rows.slice(0, runsPerPage);
    const figures = runFigures(this.store, shown);
    const last = shown.at(-1);
    return {
      rows: shown.map((row) => this.summary(row, figures.get(row.id)!)),
      ...(rows.length > runsPerPage && last ? { next: { created_at: last.created_at, id: last.id } } : {}),
    };
  }

  summaryOf(runId: string): RunSummary | undefined {
    const row = this.store.getRun(runId);
    return row && this.summary(row, runFigures(this.store, [row]).get(row.id)!);
  }

  launchOf(runId: string): Launch {
    const known = this.launches.get(runId);
    if (known) return known;
    this.launchQuery ??= this.store.db.prepare(`SELECT data FROM events WHERE run_id = ? AND kind = 'agent' AND name = 'launched' LIMIT 1`);
    const event = this.launchQuery.get(runId) as { data: string } | undefined;
    if (!event) {
      const none = { batch: null, transcript: null };
      // An ended run is never launched later: its absence is kept too.
      if (this.store.getRun(runId)?.state === 'ended') this.launches.set(runId, none);
      return none;
    }
    const data = JSON.parse(event.data) as { batch?: string; transcript?: string };
    // Found: written once, so kept (a run not launched yet may be launched later: not kept).
    const launch = { batch: data.batch ?? null, transcript: data.transcript ?? null };
    this.launches.set(runId, launch);
    return launch;
  }

  private summary(row: Readonly<RunRow>, figures: RunFigures): RunSummary {
    const limits = JSON.parse(row.budget) as BudgetLimits;
    const wallSeconds = ((row.ended_at ?? Date.now()) - row.created_at) / 1000;
    const disk = this.disk.reading(row, figures.stored_bytes);
    const { best_public: best, baseline_public: baseline } = figures;
    // An ended run's verdict; its gain counts only when it is clean, as the leaderboard scores it.
    const ended = row.state === 'ended';
    const flags = [
      ...(row.infrastructure_failure ? [`infrastructure failure: ${row.infrastructure_failure}`] : []),
      ...(ended && row.end_reason ? [row.end_reason] : []),
      ...(ended ? [figures.contamination === 'unchecked' ? 'integrity: not checked yet' : `integrity: ${figures.verdict}`] : []),
      ...(baseline !== null ? [] : ['baseline not graded yet']),
      ...(best !== null && baseline !== null && best > baseline && (!ended || figures.verdict === 'clean') ? ['beats baseline'] : []),
    ];
    return {
      id: row.id,
      task: row.task_id,
      agent: row.agent,
      driver_model: row.driver_model,
      label: row.label,
      batch: figures.batch,
      state: row.state,
      end_reason: row.end_reason,
      created_at: row.created_at,
      budget: [
        { name: 'wall', used: wallSeconds, limit: limits.wallSeconds },
        { name: 'compute', used: figures.compute_s, limit: limits.computeSeconds },
        { name: 'episodes', used: figures.episodes, limit: limits.rolloutEpisodes },
        { name: 'submissions', used: figures.submissions, limit: limits.submissions },
        { name: 'disk', used: disk?.used ?? 0, limit: disk ? disk.limit : null },
      ],
      best_public: best,
      baseline_public: baseline,
      flags,
    };
  }

  /**
   * `a2rl leaderboard`'s rows, each with the runs behind it. Computed again only when something it ranks changed: a
   * run ended, was marked, graded or checked, a job of an ended run ended, or a grade came in (a baseline, maybe); the
   * store counts each such change in summaries_generation, which never goes back: every open page asks.
   */
  leaderboard(): LeaderboardEntry[] {
    this.boardKeyQuery ??= this.store.db.prepare('SELECT n FROM summaries_generation').pluck();
    const key = String(this.boardKeyQuery.get());
    if (this.board?.key !== key) this.board = { key, rows: this.rankRuns() };
    return this.board.rows;
  }

  private rankRuns(): LeaderboardEntry[] {
    const results = runResults(this.store);
    const runIds = new Map<string, string[]>();
    for (const r of results) {
      if (r.infrastructure_failure !== null) continue;
      const key = JSON.stringify([r.task, r.agent, r.driver_model]);
      const ids = runIds.get(key);
      if (ids) ids.push(r.run_id);
      else runIds.set(key, [r.run_id]);
    }
    return buildLeaderboard(results).map((row) => ({
      ...row,
      run_ids: runIds.get(JSON.stringify([row.task, row.agent, row.driver_model])) ?? [],
    }));
  }
}
