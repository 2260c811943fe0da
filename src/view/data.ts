import type Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { keptBoard, type LeaderboardEntry, rankBoard, type RankedBoard } from '../reports/leaderboard.js';
import { LossCurve } from '../reports/metrics.js';
import { type RunFigures, runFigures, summariseEndedRunsYielding } from '../reports/run-summaries.js';
import type { RunCursor, RunFilter, RunRow, Store } from '../store/store.js';
import type { BudgetLimits } from '../tasks/budget.js';
import { packageRoot } from '../util/paths.js';
import type { DiskAccounts } from './disk.js';

/** The ranking thread's compiled entry: this file's sibling when compiled; from its sources (tests), dist's. */
const compiledSibling = fileURLToPath(new URL('./rank-worker.js', import.meta.url));
const rankWorkerEntry = existsSync(compiledSibling) ? compiledSibling : join(packageRoot, 'dist', 'src', 'view', 'rank-worker.js');

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

/**
 * What the leaderboard page shows now, never ranked for it: the newest board ranked (none before the first), whether a
 * re-rank is under way because what it ranks changed since, and, with no board yet, how many ended runs it will rank.
 */
export interface BoardState {
  board?: RankedBoard;
  updating: boolean;
  endedRuns?: number;
}

/** What the launcher recorded of a run's agent: its batch and transcript. Written once, so kept once found. */
interface Launch {
  batch: string | null;
  transcript: string | null;
}

/** Runs a page of the runs page shows at most; older ones are on the next page (keyset: `before=<created_at>:<id>`). */
export const runsPerPage = 100;

/** Training curves' seeds kept at most (the newest): a curve's state is a few numbers. */
const maxCurveSeeds = 256;

export class ViewData {
  private readonly launches = new Map<string, Launch>();
  /** Training curves as live streams left them, by `<job id>:<log offset>` (see {@link curveSeed}). */
  private readonly curveSeeds = new Map<string, LossCurve>();
  /** The newest leaderboard ranked, and the ranking under way (at most one). */
  private board?: RankedBoard;
  private ranking?: Promise<void>;
  private ranker?: Worker;
  private launchQuery?: Database.Statement;

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

  /**
   * A training job's loss curve as a live stream left it at this offset of its log, a copy to go on with: a new live
   * connection (a tab joining its browser's shared one, a reconnect) continues it instead of reading the log again.
   */
  curveSeed(jobId: number, offset: number): LossCurve | undefined {
    const seed = this.curveSeeds.get(`${jobId}:${offset}`);
    return seed && Object.assign(new LossCurve(), seed);
  }

  /** Keeps a copy of a curve's state at this offset of its job's log; the oldest go past {@link maxCurveSeeds}. */
  keepCurveSeed(jobId: number, offset: number, curve: LossCurve): void {
    this.curveSeeds.set(`${jobId}:${offset}`, Object.assign(new LossCurve(), curve));
    for (const oldest of this.curveSeeds.keys()) {
      if (this.curveSeeds.size <= maxCurveSeeds) break;
      this.curveSeeds.delete(oldest);
    }
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
   * The leaderboard as it is now (stale-while-revalidate; at 10⁵ runs a ranking takes seconds, and an upgraded store's
   * summaries a minute): the newest board ranked, here or kept in the store by any reader, whatever changed since;
   * when what it ranks changed (summaries_generation: a run ended, was marked, graded or checked, a job of an ended
   * run ended, a grade came in), a re-rank is started in the background and the live page pushes its board.
   */
  boardState(): BoardState {
    const generation = this.store.summariesGeneration();
    this.board ??= keptBoard(this.store);
    if (this.board?.generation === generation) return { board: this.board, updating: false };
    // A ranking that failed is tried again at the next page or push; the view's process goes on.
    this.rerank().catch((error: Error) => process.stderr.write(`a2rl: view: the leaderboard could not be ranked: ${error.message}\n`));
    if (this.board) return { board: this.board, updating: true };
    const endedRuns = this.store.db.prepare(`SELECT COUNT(*) FROM runs WHERE state = 'ended'`).pluck().get() as number;
    return { updating: true, endedRuns };
  }

  /** `a2rl leaderboard`'s rows, each with the runs behind it, as they are now: ranked again first if anything changed. */
  async leaderboard(): Promise<LeaderboardEntry[]> {
    while (this.boardState().updating) await this.rerank();
    return this.board!.rows;
  }

  /**
   * Ranks again, one ranking at a time, on the view's ranking thread (src/view/rank-worker.ts): the missing summaries
   * first, then the ranking, kept in the store for every reader. An in-memory store, which no other connection can
   * open, is ranked here, its summaries a transaction at a time with the event loop free between them.
   */
  private rerank(): Promise<void> {
    this.ranking ??= (async () => {
      try {
        // The page that asked is answered first.
        await new Promise((resolve) => setImmediate(resolve));
        if (this.store.path === ':memory:') {
          await summariseEndedRunsYielding(this.store);
          this.board = rankBoard(this.store);
        } else {
          this.board = await this.rankOnThread();
        }
      } finally {
        this.ranking = undefined;
      }
    })();
    return this.ranking;
  }

  private rankOnThread(): Promise<RankedBoard> {
    if (!this.ranker) {
      this.ranker = new Worker(rankWorkerEntry, { workerData: { storePath: this.store.path } });
      // It never keeps the view's process alive; one that failed is started again by the next ranking.
      this.ranker.unref();
      this.ranker.once('error', () => (this.ranker = undefined)).once('exit', () => (this.ranker = undefined));
    }
    const ranker = this.ranker;
    return new Promise<RankedBoard>((resolve, reject) => {
      const failed = (error: Error) => reject(new Error(`the ranking thread failed: ${error.message}`));
      const exited = (code: number) => reject(new Error(`the ranking thread exited (${code})`));
      ranker.once('error', failed).once('exit', exited);
      ranker.once('message', (answer: { board?: RankedBoard; error?: string }) => {
        ranker.off('error', failed).off('exit', exited);
        if (answer.board) resolve(answer.board);
        else reject(new Error(answer.error));
      });
      ranker.postMessage('rank');
    });
  }
}
