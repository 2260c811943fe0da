import Database from 'better-sqlite3';
import { existsSync, linkSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { randomUUID } from 'node:crypto';
import { A2rlError } from '../util/errors.js';

/** How often the server's checkpointer folds the write-ahead log into the database file. */
const checkpointIntervalMs = 1000;

/**
 * Log frames (4 KiB pages) past which the checkpointer makes the next commit start the log over.
 * Under steady writes a passive checkpoint never catches up with the log's end (commits land
 * while it fsyncs), so SQLite never rewinds it: at 3,000 calls a second it grew 43 MiB a second.
 */
export const maxLogFrames = 16_384;

/**
 * The checkpointer thread: its own connection, a passive checkpoint (it never blocks a writer)
 * every interval, and a restart checkpoint when the log is past {@link maxLogFrames}: it holds
 * writers back for the few frames the passive one left, so the log stays about 64 MiB. Evaluated
 * code, so it runs the same from the sources (tests) and from dist.
 */
const checkpointerSource = `
const { workerData } = require('node:worker_threads');
const Database = require(workerData.sqlite);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 5000');
setInterval(() => {
  // A checkpoint that fails (a full disk: the database file cannot grow) is tried again at the next interval.
  try {
    const [{ log }] = db.pragma('wal_checkpoint(PASSIVE)');
    if (log > workerData.maxLogFrames) db.pragma('wal_checkpoint(RESTART)');
  } catch {}
}, workerData.intervalMs);
`;

/**
 * A store file of 0 bytes whose write-ahead log is empty too lost its data (a copy cut short, a full disk): SQLite
 * would take it for a new database and a2rl would write an empty store over it, the old runs gone without a word.
 */
function refuseEmptyStore(path: string): void {
  const size = (file: string) => statSync(file, { throwIfNoEntry: false })?.size;
  if (size(path) === 0 && !size(`${path}-wal`))
    throw new A2rlError(
      'STORE_UNUSABLE',
      `${path} is empty (0 bytes), so its runs are lost; a2rl never replaces a store: restore it from a backup, or remove it to start a new one.`,
    );
}

/**
 * Makes a new store whole before it takes its name: written beside it, then linked in, so that no process ever sees a
 * store being born (SQLite's file is 0 bytes until its first commit, which {@link refuseEmptyStore} would take for a
 * lost store). Two processes creating the same store at once: the first link wins, the other opens the winner's.
 */
function createStoreFile(path: string): void {
  const draft = `${path}.${process.pid}-${randomUUID().slice(0, 8)}.new`;
  try {
    const db = new Database(draft);
    try {
      db.pragma('journal_mode = WAL');
      migrate(db, draft);
    } finally {
      db.close();
    }
    try {
      linkSync(draft, path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // A filesystem without hard links: a rename, atomic too, only racing another process's creation.
      if ((code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP') && !existsSync(path)) renameSync(draft, path);
      else if (code !== 'EEXIST') throw error;
    }
  } finally {
    for (const file of [draft, `${draft}-wal`, `${draft}-shm`]) rmSync(file, { force: true });
  }
}

/** Brings `db` to the current schema in one transaction; refuses a store of a newer a2rl. */
function migrate(db: Database.Database, path: string): void {
  const version = () => db.pragma('user_version', { simple: true }) as number;
  if (version() > migrations.length)
    throw new A2rlError(
      'STORE_UNUSABLE',
      `${path} is a store of a newer a2rl (schema ${version()}; this one knows up to ${migrations.length}): run the a2rl that wrote it, or update this one.`,
    );
  // Up to date: no write lock to wait for (a check's process opens the store while a busy server writes).
  if (version() === migrations.length) return;
  const upgrade = db.transaction(() => {
    for (let next = version(); next < migrations.length; next++) {
      db.exec(migrations[next]!);
      db.pragma(`user_version = ${next + 1}`);
    }
  });
  upgrade.immediate();
}

/** Each entry upgrades the schema by one version; never edit a shipped entry, append. */
const migrations: string[] = [
  `CREATE TABLE runs (
     id TEXT PRIMARY KEY,
     task_id TEXT NOT NULL,
     label TEXT,
     budget TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('active', 'ended')),
     end_reason TEXT,
     dir TEXT NOT NULL,
     sandbox TEXT NOT NULL,
     grader_version TEXT NOT NULL,
     owner TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     ended_at INTEGER
   );
   CREATE TABLE events (
     id INTEGER PRIMARY KEY,
     run_id TEXT NOT NULL REFERENCES runs(id),
     at INTEGER NOT NULL,
     t_rel_ms INTEGER NOT NULL,
     kind TEXT NOT NULL,
     name TEXT NOT NULL,
     data TEXT NOT NULL
   );
   CREATE INDEX events_by_run ON events(run_id, id);
   CREATE TABLE jobs (
     id INTEGER PRIMARY KEY,
     run_id TEXT NOT NULL REFERENCES runs(id),
     kind TEXT NOT NULL CHECK (kind IN ('exec', 'training', 'rollouts', 'grading')),
     command TEXT NOT NULL,
     state TEXT NOT NULL,
     reason TEXT,
     exit_code INTEGER,
     signal TEXT,
     resources TEXT NOT NULL,
     charged INTEGER NOT NULL,
     cpu_s REAL NOT NULL DEFAULT 0,
     gpu_s REAL NOT NULL DEFAULT 0,
     episodes_requested INTEGER NOT NULL DEFAULT 0,
     episodes_done INTEGER,
     result TEXT,
     log_path TEXT NOT NULL,
     owner TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     ended_at INTEGER
   );
   CREATE INDEX jobs_by_run ON jobs(run_id, id);
   CREATE INDEX jobs_by_state ON jobs(state);
   CREATE TABLE submissions (
     id INTEGER PRIMARY KEY,
     run_id TEXT NOT NULL REFERENCES runs(id),
     path TEXT NOT NULL,
     note TEXT,
     content_hash TEXT NOT NULL,
     files INTEGER NOT NULL,
     bytes INTEGER NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('queued', 'grading', 'graded', 'failed')),
     error TEXT,
     created_at INTEGER NOT NULL,
     graded_at INTEGER,
     UNIQUE (run_id, content_hash)
   );
   CREATE TABLE grades (
     task_id TEXT NOT NULL,
     grader_version TEXT NOT NULL,
     content_hash TEXT NOT NULL,
     public_score REAL NOT NULL,
     private_score REAL NOT NULL,
     details TEXT NOT NULL,
     duration_ms INTEGER NOT NULL,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (task_id, grader_version, content_hash)
   );
   CREATE TABLE judge_cache (
     key TEXT PRIMARY KEY,
     judge TEXT NOT NULL,
     preference TEXT NOT NULL CHECK (preference IN ('a', 'b', 'tie')),
     created_at INTEGER NOT NULL
   );`,
  // Runs served over HTTP: the bearer token's SHA-256 only, never the token itself.
  `CREATE TABLE run_tokens (
     run_id TEXT PRIMARY KEY REFERENCES runs(id),
     token_hash TEXT NOT NULL UNIQUE,
     created_at INTEGER NOT NULL,
     revoked_at INTEGER
   );`,
  // Who is benchmarked: set by whatever launches the agent (a2rl run), read by reports and the leaderboard.
  `ALTER TABLE runs ADD COLUMN agent TEXT;
   ALTER TABLE runs ADD COLUMN agent_version TEXT;
   ALTER TABLE runs ADD COLUMN driver_model TEXT;`,
  // A run's disk account sums its code snapshots without scanning all its events.
  `CREATE INDEX events_by_kind ON events(run_id, kind, name);`,
  // No silent non-run: why a run's infrastructure failed (the agent never had the tools, exited abnormally); null otherwise.
  `ALTER TABLE runs ADD COLUMN infrastructure_failure TEXT;`,
  // events_by_kind starts with run_id too, and only reports list a run's events in order: one index page less
  // to write in the commit every tool call waits for (7.2 to 5.8 µs p50 on the 2-core bench machine).
  `DROP INDEX events_by_run;`,
  // A full-tier run's base model is chosen per run: its hub id, and the content hash its baseline grade is stored under.
  `ALTER TABLE runs ADD COLUMN base_model TEXT;
   ALTER TABLE runs ADD COLUMN base_model_hash TEXT;`,
  // Ids an agent sees count 1, 2, 3… in its own run (a global id would tell it that other runs exist): an agent job's
  // and a submission's number in its run. Gradings are the server's, never shown by number: theirs is null.
  `ALTER TABLE jobs ADD COLUMN seq INTEGER;
   UPDATE jobs SET seq = (SELECT COUNT(*) FROM jobs AS earlier
     WHERE earlier.run_id = jobs.run_id AND earlier.kind != 'grading' AND earlier.id <= jobs.id) WHERE kind != 'grading';
   CREATE UNIQUE INDEX jobs_by_seq ON jobs(run_id, seq);
   ALTER TABLE submissions ADD COLUMN seq INTEGER;
   UPDATE submissions SET seq = (SELECT COUNT(*) FROM submissions AS earlier
     WHERE earlier.run_id = submissions.run_id AND earlier.id <= submissions.id);
   CREATE UNIQUE INDEX submissions_by_seq ON submissions(run_id, seq);`,
  // Integrity checks of a run (src/integrity/): the contamination check's and the judge's reviews, each kept, the latest read.
  `CREATE TABLE integrity_checks (
     id INTEGER PRIMARY KEY,
     run_id TEXT NOT NULL REFERENCES runs(id),
     kind TEXT NOT NULL CHECK (kind IN ('contamination', 'review')),
     verdict TEXT NOT NULL CHECK (verdict IN ('clean', 'suspect', 'flagged', 'failed')),
     checker TEXT NOT NULL,
     details TEXT NOT NULL,
     duration_ms INTEGER NOT NULL,
     created_at INTEGER NOT NULL
   );
   CREATE INDEX integrity_checks_by_run ON integrity_checks(run_id, kind, id);`,
  // A contamination check that could not finish is `incomplete`, never clean (issue 46); `failed` stays the review's.
  `CREATE TABLE integrity_checks_v2 (
     id INTEGER PRIMARY KEY,
     run_id TEXT NOT NULL REFERENCES runs(id),
     kind TEXT NOT NULL CHECK (kind IN ('contamination', 'review')),
     verdict TEXT NOT NULL CHECK (verdict IN ('clean', 'suspect', 'flagged', 'incomplete', 'failed')),
     checker TEXT NOT NULL,
     details TEXT NOT NULL,
     duration_ms INTEGER NOT NULL,
     created_at INTEGER NOT NULL
   );
   INSERT INTO integrity_checks_v2 SELECT id, run_id, kind,
     CASE WHEN kind = 'contamination' AND verdict = 'failed' THEN 'incomplete' ELSE verdict END,
     checker, details, duration_ms, created_at FROM integrity_checks;
   DROP TABLE integrity_checks;
   ALTER TABLE integrity_checks_v2 RENAME TO integrity_checks;
   CREATE INDEX integrity_checks_by_run ON integrity_checks(run_id, kind, id);`,
  // A store of 10⁵ runs (issue 49): every query on a live path (pages, runs list, leaderboard, budget checks) searches an
  // index, never scans runs, events or submissions; keyset pages of runs, newest first, under each filter. The events
  // index ends with id instead of name (same size, no index more for a tool call to write): a run's last tool calls and
  // a kind's events in order are read straight from it. A run's summary (see src/reports/run-summaries.ts) is written
  // once when first read after the run settled, was graded or checked; a write that changes what it says deletes it and
  // counts a change of its run (or, a grade, of its task) in summary_changes: a summary computed before that change is
  // not kept. summaries_generation counts those changes of ended runs and grades, never back: the leaderboard page's cache key.
  // run_batches: the `a2rl run` batch each run was launched in, written at launch (older runs' from their launch events,
  // each run's found by an index search: CROSS JOIN keeps runs the outer loop, never a scan of every event).
  // Written to run again safely (IF NOT EXISTS): a store set back to an older version upgrades all the same.
  `CREATE INDEX IF NOT EXISTS runs_by_state ON runs(state, created_at, id);
   CREATE INDEX IF NOT EXISTS runs_by_created ON runs(created_at, id);
   CREATE INDEX IF NOT EXISTS runs_by_task ON runs(task_id, created_at, id);
   CREATE INDEX IF NOT EXISTS runs_by_agent ON runs(COALESCE(agent, label, ''), created_at, id);
   CREATE INDEX IF NOT EXISTS submissions_by_state ON submissions(state);
   DROP INDEX IF EXISTS events_by_kind;
   CREATE INDEX IF NOT EXISTS events_by_kind ON events(run_id, kind, id);
   CREATE TABLE IF NOT EXISTS run_summaries (
     run_id TEXT PRIMARY KEY REFERENCES runs(id),
     task_id TEXT NOT NULL,
     benchmark INTEGER NOT NULL,
     has_baseline INTEGER NOT NULL,
     summary TEXT NOT NULL,
     written_at INTEGER NOT NULL
   );
   CREATE INDEX IF NOT EXISTS run_summaries_by_task ON run_summaries(task_id, has_baseline);
   CREATE TABLE IF NOT EXISTS summary_changes (subject TEXT PRIMARY KEY, changes INTEGER NOT NULL) WITHOUT ROWID;
   CREATE TABLE IF NOT EXISTS summaries_generation (n INTEGER NOT NULL);
   INSERT INTO summaries_generation SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM summaries_generation);
   CREATE TABLE IF NOT EXISTS run_batches (run_id TEXT PRIMARY KEY REFERENCES runs(id), batch TEXT NOT NULL) WITHOUT ROWID;
   CREATE INDEX IF NOT EXISTS run_batches_by_batch ON run_batches(batch);
   INSERT OR IGNORE INTO run_batches (run_id, batch)
     SELECT runs.id, json_extract(events.data, '$.batch') FROM runs
       CROSS JOIN events ON events.run_id = runs.id AND events.kind = 'agent' AND events.name = 'launched'
       WHERE json_extract(events.data, '$.batch') IS NOT NULL;`,
  // Leaderboards kept (issue 49): each as computed at a summaries_generation, by what it was asked (task, policy):
  // the view's page and `a2rl leaderboard` read one instead of ranking 10⁵ runs again until what it ranks changes.
  `CREATE TABLE IF NOT EXISTS leaderboards (request TEXT PRIMARY KEY, generation INTEGER NOT NULL, rows TEXT NOT NULL) WITHOUT ROWID;`,
];

export type RunState = 'active' | 'ended';
export type JobKind = 'exec' | 'training' | 'rollouts' | 'grading';
export type JobState = 'running' | 'succeeded' | 'failed' | 'cancelled' | 'timed_out' | 'oom_killed' | 'budget_stopped' | 'lost';
export type SubmissionState = 'queued' | 'grading' | 'graded' | 'failed';

export const finishedJobStates: readonly JobState[] = [
  'succeeded',
  'failed',
  'cancelled',
  'timed_out',
  'oom_killed',
  'budget_stopped',
  'lost',
];

export interface RunRow {
  id: string;
  task_id: string;
  label: string | null;
  budget: string;
  state: RunState;
  end_reason: string | null;
  dir: string;
  sandbox: string;
  /** The grader (and judge) that scores this run's submissions. */
  grader_version: string;
  /** The server process (pid and start time) that serves the run. */
  owner: string;
  created_at: number;
  ended_at: number | null;
  /** The agent stack (e.g. claude-code), its version and the model driving it; null when the launcher did not say. */
  agent: string | null;
  agent_version: string | null;
  driver_model: string | null;
  /** Why the run's infrastructure failed (the agent never had the tools, or did not exit normally): not the agent's result. */
  infrastructure_failure: string | null;
  /** A full-tier run's base model (a Hugging Face id); null for micro tasks, which ship theirs. */
  base_model: string | null;
  /** Content hash of the run's base model: its baseline grade's key. Null in runs created before it was recorded. */
  base_model_hash: string | null;
}

export type RunAgent = Pick<RunRow, 'agent' | 'agent_version' | 'driver_model'>;

export interface JobRow {
  /** The store's id: the server's own name for the job (events, logs, reports). */
  id: number;
  run_id: string;
  /** Its number among the run's agent jobs (1, 2, 3…): the id the agent sees. Null for a grading. */
  seq: number | null;
  kind: JobKind;
  command: string;
  state: JobState;
  reason: string | null;
  exit_code: number | null;
  signal: string | null;
  resources: string;
  charged: number;
  cpu_s: number;
  gpu_s: number;
  episodes_requested: number;
  episodes_done: number | null;
  result: string | null;
  log_path: string;
  owner: string;
  /** When the job started (jobs start as they are created). */
  created_at: number;
  ended_at: number | null;
}

export interface SubmissionRow {
  /** The store's id: the server's own name for the submission (events, reports). */
  id: number;
  run_id: string;
  /** Its number among the run's submissions (1, 2, 3…): the id the agent sees. */
  seq: number;
  path: string;
  note: string | null;
  content_hash: string;
  files: number;
  bytes: number;
  state: SubmissionState;
  error: string | null;
  created_at: number;
  graded_at: number | null;
}

export interface GradeRow {
  task_id: string;
  grader_version: string;
  content_hash: string;
  public_score: number;
  private_score: number;
  details: string;
  duration_ms: number;
  created_at: number;
}

export interface RunTokenRow {
  run_id: string;
  /** Hex SHA-256 of the token. */
  token_hash: string;
  created_at: number;
  revoked_at: number | null;
}

export interface EventRow {
  id: number;
  run_id: string;
  at: number;
  t_rel_ms: number;
  kind: string;
  name: string;
  data: string;
}

export type IntegrityCheckKind = 'contamination' | 'review';
/** `incomplete`: a contamination check that did not finish or did not read enough; `failed`: a review whose answer could not be read. */
export type IntegrityVerdict = 'clean' | 'suspect' | 'flagged' | 'incomplete' | 'failed';

/** One integrity check of a run (src/integrity/): its verdict, who checked (checker and version, judge model and prompt), the evidence as JSON. */
export interface IntegrityCheckRow {
  id: number;
  run_id: string;
  kind: IntegrityCheckKind;
  verdict: IntegrityVerdict;
  checker: string;
  details: string;
  duration_ms: number;
  created_at: number;
}

/** A run's summary as kept (src/reports/run-summaries.ts writes it): what pages, `runs list` and the leaderboard read. */
export interface RunSummaryRow {
  run_id: string;
  task_id: string;
  /** 1 when an agent worked in it (see isBenchmarkRun): the leaderboard ranks only these. */
  benchmark: number;
  /** 1 when its baseline grade was known when it was written; a new baseline grade of its task deletes the others. */
  has_baseline: number;
  /** The figures, as JSON. */
  summary: string;
  written_at: number;
}

/** Filters of a page of runs; each is a search of its own index. */
export interface RunFilter {
  task?: string;
  /** The run's agent, else its label. */
  agent?: string;
  state?: RunState;
  /** Runs `a2rl run` launched in this batch. */
  batch?: string;
}

/** What a summary was computed from: how often its run, and its task's grades, had changed (Store.summaryInputs). */
export interface SummaryInputs {
  run: number;
  task: number;
}

/** Where a page of runs (newest first) continues: the last run shown. */
export interface RunCursor {
  created_at: number;
  id: string;
}

export interface Usage {
  computeSeconds: number;
  submissions: number;
  rolloutEpisodes: number;
}

/**
 * The server's SQLite store: the single source of truth for runs, events, jobs,
 * submissions and grades. WAL mode, and every write is its own committed transaction, so
 * a crash of the server loses nothing that a tool call already reported (synchronous =
 * NORMAL: a commit is in the log, in the OS's page cache, when the call returns; the
 * log is fsynced at checkpoints, so a power loss may take back the last ones).
 */
export class Store {
  readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  private checkpointer?: Worker;
  /** `insertEvents`' transaction, built once. */
  private eventBatch?: Database.Transaction<(batch: Array<Omit<EventRow, 'id'>>) => void>;
  /** Run rows, tokens, jobs and submissions changed through this connection, which data_version does not count. */
  private localChanges = 0;
  /** Run rows as last read, with the {@link changesVersion} they were read at: every tool call reads its run. */
  private readonly runRows = new Map<string, { version: string; row: Readonly<RunRow> }>();
  /** Runs' usage as last summed, with the {@link changesVersion} it was summed at: every budget check reads it. */
  private readonly usages = new Map<string, { version: string; usage: Readonly<Usage> }>();

  constructor(readonly path: string) {
    if (path !== ':memory:') {
      mkdirSync(dirname(path), { recursive: true });
      if (!existsSync(path)) createStoreFile(path);
      refuseEmptyStore(path);
    }
    this.db = new Database(path);
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma('foreign_keys = ON');
      this.db.pragma('busy_timeout = 5000');
      migrate(this.db, path);
    } catch (error) {
      this.db.close();
      const code = (error as { code?: unknown }).code;
      if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT')
        throw new A2rlError(
          'STORE_UNUSABLE',
          `${path} is not a readable a2rl store (SQLite: ${(error as Error).message}); a2rl never replaces a store: restore it from a backup, or move it away to start a new one.`,
          { cause: error },
        );
      throw error;
    }
  }

  /**
   * The prepared statement of `sql`, compiled once per store: the hot paths (every tool
   * call records an event and reads the run) then skip SQLite's parser.
   */
  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  get schemaVersion(): number {
    return this.db.pragma('user_version', { simple: true }) as number;
  }

  /**
   * Moves write-ahead-log checkpoints off this thread, for a server answering tool calls. A
   * checkpoint copies the log into the database file and fsyncs it (milliseconds); SQLite's
   * automatic one runs inside whichever commit crosses 1000 log pages, so every few hundred
   * tool calls one waited for it. A worker thread with its own connection checkpoints every
   * second instead; should it fail, this connection checkpoints itself again.
   */
  checkpointInBackground(): void {
    if (this.path === ':memory:' || this.checkpointer) return;
    this.db.pragma('wal_autocheckpoint = 0');
    const worker = new Worker(checkpointerSource, {
      eval: true,
      workerData: {
        path: this.path,
        sqlite: createRequire(import.meta.url).resolve('better-sqlite3'),
        intervalMs: checkpointIntervalMs,
        maxLogFrames,
      },
    });
    worker.on('error', () => {
      if (this.db.open) this.db.pragma('wal_autocheckpoint = 1000');
    });
    worker.unref();
    this.checkpointer = worker;
  }

  close(): void {
    void this.checkpointer?.terminate();
    this.db.close();
  }

  // runs

  insertRun(
    run: Omit<RunRow, 'state' | 'end_reason' | 'ended_at' | 'infrastructure_failure' | 'base_model' | 'base_model_hash' | keyof RunAgent> &
      Partial<Pick<RunRow, 'base_model' | 'base_model_hash'>>,
  ): void {
    this.localChanges++;
    this.statement(
      `INSERT INTO runs (id, task_id, label, budget, state, dir, sandbox, grader_version, owner, created_at, base_model, base_model_hash)
         VALUES (@id, @task_id, @label, @budget, 'active', @dir, @sandbox, @grader_version, @owner, @created_at, @base_model, @base_model_hash)`,
    ).run({ base_model: null, base_model_hash: null, ...run });
  }

  /** The run's row, frozen: it is shared with later readers until the run changes. */
  getRun(id: string): Readonly<RunRow> | undefined {
    return this.runAt(id, this.changesVersion());
  }

  /** A run's row and what it has used, as of one {@link changesVersion} read: what every budget check needs. */
  runStatus(id: string): { row: Readonly<RunRow>; usage: Readonly<Usage> } | undefined {
    const version = this.changesVersion();
    const row = this.runAt(id, version);
    return row && { row, usage: this.usageAt(id, version) };
  }

  private runAt(id: string, version: string): Readonly<RunRow> | undefined {
    const cached = this.runRows.get(id);
    if (cached?.version === version) return cached.row;
    const row = this.statement('SELECT * FROM runs WHERE id = ?').get(id) as RunRow | undefined;
    if (row === undefined) return undefined;
    this.runRows.set(id, { version, row: Object.freeze(row) });
    return row;
  }

  listRuns(): RunRow[] {
    return this.statement('SELECT * FROM runs ORDER BY created_at').all() as RunRow[];
  }

  /** The runs of a task with this label, oldest first (a suite's cell): a search of the task's runs, not of every run. */
  runsLabelled(taskId: string, label: string): RunRow[] {
    return this.statement('SELECT * FROM runs WHERE task_id = ? AND label = ? ORDER BY created_at, id').all(taskId, label) as RunRow[];
  }

  /**
   * The newest `limit` runs (every run without one), newest first, one row at a time, read down the creation index:
   * `a2rl runs list` at 10⁵ runs holds no array of them.
   */
  iterateRuns(limit?: number): IterableIterator<RunRow & { token: 'stdio' | 'http' | 'http, revoked' }> {
    return this.statement(
      `SELECT runs.*, CASE WHEN run_tokens.run_id IS NULL THEN 'stdio' WHEN run_tokens.revoked_at IS NULL THEN 'http'
         ELSE 'http, revoked' END AS token
       FROM runs LEFT JOIN run_tokens ON run_tokens.run_id = runs.id ORDER BY runs.created_at DESC, runs.id DESC LIMIT ?`,
    ).iterate(limit ?? -1) as IterableIterator<RunRow & { token: 'stdio' | 'http' | 'http, revoked' }>;
  }

  /** How many runs the store holds. */
  countRuns(): number {
    return this.statement('SELECT COUNT(*) FROM runs').pluck().get() as number;
  }

  /**
   * Up to `limit` runs, newest first, matching `filter`, after `before` (keyset pagination: a page costs the same
   * at the first run as at the 100,000th). Each filter but the batch is a search of an index of its own.
   */
  pageOfRuns(filter: RunFilter, limit: number, before?: RunCursor): RunRow[] {
    const where = [
      ...(filter.task === undefined ? [] : ['task_id = @task']),
      ...(filter.agent === undefined ? [] : [`COALESCE(agent, label, '') = @agent`]),
      ...(filter.state === undefined ? [] : ['state = @state']),
      ...(filter.batch === undefined ? [] : ['id IN (SELECT run_id FROM run_batches WHERE batch = @batch)']),
      ...(before === undefined ? [] : ['(created_at, id) < (@created_at, @id)']),
    ];
    return this.statement(
      `SELECT * FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT @limit`,
    ).all({
      task: filter.task,
      agent: filter.agent,
      state: filter.state,
      batch: filter.batch,
      created_at: before?.created_at,
      id: before?.id,
      limit,
    }) as RunRow[];
  }

  /** The distinct values of runs' tasks or agents (else labels), one index seek each: the runs page's filter choices. */
  distinctRunValues(of: 'task' | 'agent'): string[] {
    const column = of === 'task' ? 'task_id' : `COALESCE(agent, label, '')`;
    return this.statement(
      `WITH RECURSIVE seen(value) AS (
         SELECT MIN(${column}) FROM runs
         UNION ALL SELECT (SELECT MIN(${column}) FROM runs WHERE ${column} > seen.value) FROM seen WHERE seen.value IS NOT NULL)
       SELECT value FROM seen WHERE value IS NOT NULL`,
    )
      .pluck()
      .all() as string[];
  }

  /** The batches runs were launched in, one index seek each. */
  runBatches(): string[] {
    return this.statement(
      `WITH RECURSIVE seen(batch) AS (
         SELECT MIN(batch) FROM run_batches
         UNION ALL SELECT (SELECT MIN(batch) FROM run_batches WHERE batch > seen.batch) FROM seen WHERE seen.batch IS NOT NULL)
       SELECT batch FROM seen WHERE batch IS NOT NULL`,
    )
      .pluck()
      .all() as string[];
  }

  /** Records the `a2rl run` batch a run is launched in (the runs page filters by it). */
  setRunBatch(runId: string, batch: string): void {
    this.statement('INSERT OR REPLACE INTO run_batches (run_id, batch) VALUES (?, ?)').run(runId, batch);
  }

  /** The batch a run was launched in; null when `a2rl run` did not launch it. */
  batchOf(runId: string): string | null {
    return (this.statement('SELECT batch FROM run_batches WHERE run_id = ?').pluck().get(runId) as string | undefined) ?? null;
  }

  // run summaries

  runSummaries(runIds: readonly string[]): Map<string, RunSummaryRow> {
    const rows = this.statement('SELECT * FROM run_summaries WHERE run_id IN (SELECT value FROM json_each(?))').all(
      JSON.stringify(runIds),
    ) as RunSummaryRow[];
    return new Map(rows.map((row) => [row.run_id, row]));
  }

  /** Ended runs with no summary kept (ended since, changed since, or from before summaries were kept). */
  endedRunsWithoutSummary(task?: string): RunRow[] {
    return this.statement(
      `SELECT * FROM runs WHERE state = 'ended' AND (@task IS NULL OR task_id = @task)
         AND NOT EXISTS (SELECT 1 FROM run_summaries WHERE run_summaries.run_id = runs.id) ORDER BY created_at, id`,
    ).all({ task: task ?? null }) as RunRow[];
  }

  /**
   * The kept summaries of ended benchmark runs with a baseline (of one task, or all), one at a time, each with its run's
   * grader version (the environment it was graded in): the leaderboard's input, read in one query.
   */
  iterateRankedSummaries(task?: string): IterableIterator<RunSummaryRow & Pick<RunRow, 'grader_version'>> {
    return (
      task === undefined
        ? this.statement(
            `SELECT run_summaries.*, runs.grader_version FROM run_summaries JOIN runs ON runs.id = run_summaries.run_id
               WHERE benchmark = 1 AND has_baseline = 1 ORDER BY runs.created_at, runs.id`,
          ).iterate()
        : this.statement(
            `SELECT run_summaries.*, runs.grader_version FROM run_summaries JOIN runs ON runs.id = run_summaries.run_id
               WHERE run_summaries.task_id = ? AND has_baseline = 1 AND benchmark = 1 ORDER BY runs.created_at, runs.id`,
          ).iterate(task)
    ) as IterableIterator<RunSummaryRow & Pick<RunRow, 'grader_version'>>;
  }

  /** The count of changes to what leaderboards rank (summaries_generation): a leaderboard computed at another is stale. */
  summariesGeneration(): number {
    return this.statement('SELECT n FROM summaries_generation').pluck().get() as number;
  }

  /** A leaderboard kept for this request, as JSON, if it was computed at `generation`. */
  keptLeaderboard(request: string, generation: number): string | undefined {
    return this.statement('SELECT rows FROM leaderboards WHERE request = ? AND generation = ?').pluck().get(request, generation) as
      string | undefined;
  }

  /** Keeps a leaderboard computed at `generation`, unless what it ranks changed meanwhile (a write on another connection). */
  keepLeaderboard(request: string, generation: number, rows: string): void {
    this.statement(
      `INSERT OR REPLACE INTO leaderboards (request, generation, rows) SELECT @request, @generation, @rows
         WHERE (SELECT n FROM summaries_generation) = @generation`,
    ).run({ request, generation, rows });
  }

  /**
   * How often what a run's summary says has changed: its own writes, and grades of its task (one may be its baseline):
   * read before computing the summary, handed to {@link putRunSummaries}.
   */
  summaryInputs(run: Pick<RunRow, 'id' | 'task_id'>): SummaryInputs {
    return this.statement(
      `SELECT COALESCE((SELECT changes FROM summary_changes WHERE subject = @run), 0) AS run,
              COALESCE((SELECT changes FROM summary_changes WHERE subject = @task), 0) AS task`,
    ).get({ run: `run:${run.id}`, task: `task:${run.task_id}` }) as SummaryInputs;
  }

  /**
   * Keeps runs' summaries, in one transaction, each only if its run is settled (ended, no job running, no submission
   * queued or grading) and nothing it says changed since its {@link summaryInputs} were read (its task's grades matter
   * only to one without a baseline): a summary computed on another connection while a job ended or a check came in is
   * stale already, and is not kept. How many were kept.
   */
  putRunSummaries(rows: ReadonlyArray<{ row: RunSummaryRow; inputs: SummaryInputs }>): number {
    const put = this.statement(
      `INSERT OR REPLACE INTO run_summaries (run_id, task_id, benchmark, has_baseline, summary, written_at)
         SELECT @run_id, @task_id, @benchmark, @has_baseline, @summary, @written_at
         WHERE EXISTS (SELECT 1 FROM runs WHERE id = @run_id AND state = 'ended')
           AND NOT EXISTS (SELECT 1 FROM jobs WHERE run_id = @run_id AND state = 'running')
           AND NOT EXISTS (SELECT 1 FROM submissions WHERE run_id = @run_id AND state IN ('queued', 'grading'))
           AND COALESCE((SELECT changes FROM summary_changes WHERE subject = 'run:' || @run_id), 0) = @run_changes
           AND (@has_baseline = 1
             OR COALESCE((SELECT changes FROM summary_changes WHERE subject = 'task:' || @task_id), 0) = @task_changes)`,
    );
    const putAll = (): number =>
      rows.reduce((kept, { row, inputs }) => kept + put.run({ ...row, run_changes: inputs.run, task_changes: inputs.task }).changes, 0);
    return rows.length === 1 ? putAll() : this.db.transaction(putAll)();
  }

  /**
   * Drops a run's kept summary: something it says changed (it is written again when next read). The change is counted
   * first: a summary computed before it, on another connection, is then refused by {@link putRunSummaries}.
   */
  private forgetSummary(runId: string): void {
    this.countSummaryChange('run', runId);
    this.statement('DELETE FROM run_summaries WHERE run_id = ?').run(runId);
  }

  /** Counts a change of what a run's summary says, or of a task's grades (`summary_changes`' subject `run:<id>`, `task:<id>`). */
  private countSummaryChange(kind: 'run' | 'task', id: string): void {
    this.statement(
      `INSERT INTO summary_changes (subject, changes) VALUES (@kind || ':' || @id, 1) ON CONFLICT DO UPDATE SET changes = changes + 1`,
    ).run({ kind, id });
    // What the leaderboard ranks (ended runs, with their task's baselines) changed: its cache key moves.
    this.statement(
      `UPDATE summaries_generation SET n = n + 1
         WHERE @kind = 'task' OR EXISTS (SELECT 1 FROM runs WHERE id = @id AND state = 'ended')`,
    ).run({ kind, id });
  }

  listActiveRuns(): RunRow[] {
    return this.statement(`SELECT * FROM runs WHERE state = 'active' ORDER BY created_at`).all() as RunRow[];
  }

  endRun(id: string, reason: string, at: number): boolean {
    this.localChanges++;
    const changed = this.statement(`UPDATE runs SET state = 'ended', end_reason = ?, ended_at = ? WHERE id = ? AND state = 'active'`).run(
      reason,
      at,
      id,
    ).changes;
    if (changed > 0) this.forgetSummary(id);
    return changed > 0;
  }

  /** Records who is benchmarked in a run; fields left undefined keep their value. */
  setRunAgent(id: string, agent: Partial<RunAgent>): void {
    this.localChanges++;
    const changed = this.statement(
      `UPDATE runs SET agent = COALESCE(@agent, agent), agent_version = COALESCE(@agent_version, agent_version),
           driver_model = COALESCE(@driver_model, driver_model) WHERE id = @id`,
    ).run({
      id,
      agent: agent.agent ?? null,
      agent_version: agent.agent_version ?? null,
      driver_model: agent.driver_model ?? null,
    }).changes;
    if (changed === 0) throw new Error(`no run ${id} in ${this.path}`);
    this.forgetSummary(id);
  }

  /** Marks a run whose infrastructure failed; reports and the leaderboard count it apart, never as the agent's result. */
  markInfrastructureFailure(id: string, reason: string): void {
    this.localChanges++;
    this.statement('UPDATE runs SET infrastructure_failure = ? WHERE id = ?').run(reason, id);
    this.forgetSummary(id);
  }

  /** Whether a run recorded an event of this kind (and name). */
  hasEvent(runId: string, kind: string, name?: string): boolean {
    const row =
      name === undefined
        ? this.statement('SELECT 1 FROM events WHERE run_id = ? AND kind = ? LIMIT 1').get(runId, kind)
        : this.statement('SELECT 1 FROM events WHERE run_id = ? AND kind = ? AND name = ? LIMIT 1').get(runId, kind, name);
    return row !== undefined;
  }

  /** Hands a run from one server process to another; false when `from` no longer owns it. */
  claimRun(id: string, from: string, to: string): boolean {
    this.localChanges++;
    return this.statement('UPDATE runs SET owner = ? WHERE id = ? AND owner = ?').run(to, id, from).changes > 0;
  }

  // run tokens

  insertRunToken(runId: string, tokenHash: string, at: number): void {
    this.statement('INSERT INTO run_tokens (run_id, token_hash, created_at) VALUES (?, ?, ?)').run(runId, tokenHash, at);
  }

  getRunToken(runId: string): RunTokenRow | undefined {
    return this.statement('SELECT * FROM run_tokens WHERE run_id = ?').get(runId) as RunTokenRow | undefined;
  }

  findRunToken(tokenHash: string): RunTokenRow | undefined {
    return this.statement('SELECT * FROM run_tokens WHERE token_hash = ?').get(tokenHash) as RunTokenRow | undefined;
  }

  /**
   * Changes whenever a run row, a token, a job or a submission may have changed: on such a write through this store,
   * or any commit by another connection (SQLite's data_version), e.g. `a2rl runs revoke`. What
   * was derived from them before then must be looked up again.
   */
  changesVersion(): string {
    return `${this.statement('PRAGMA data_version').pluck().get() as number}:${this.localChanges}`;
  }

  /** Revokes a run's token and ends the run, in one transaction: a crash cannot leave a revoked run active. Whether the run ended now. */
  revokeRun(runId: string, reason: string, at: number): boolean {
    this.localChanges++;
    return this.db.transaction(() => {
      this.statement('UPDATE run_tokens SET revoked_at = ? WHERE run_id = ? AND revoked_at IS NULL').run(at, runId);
      return this.endRun(runId, reason, at);
    })();
  }

  // events

  insertEvent(event: Omit<EventRow, 'id'>): number {
    return Number(
      this.statement(
        `INSERT INTO events (run_id, at, t_rel_ms, kind, name, data)
           VALUES (@run_id, @at, @t_rel_ms, @kind, @name, @data)`,
      ).run(event).lastInsertRowid,
    );
  }

  /** Appends events, of any runs, in one transaction: all of them are committed, or none. */
  insertEvents(events: Array<Omit<EventRow, 'id'>>): void {
    // A lone event is its own transaction already; a wrapper built per call costs more than the insert (11 against 7 µs).
    if (events.length === 1) this.insertEvent(events[0]!);
    else {
      this.eventBatch ??= this.db.transaction((batch: Array<Omit<EventRow, 'id'>>) => {
        for (const event of batch) this.insertEvent(event);
      });
      this.eventBatch(events);
    }
  }

  /**
   * A run's events (of a kind) in order, read a page at a time (keyset searches of events_by_kind): a run of 10⁶ calls
   * is never one array, and the connection stays free for other queries between pages. All kinds: each kind's pages,
   * merged by id (an index in id order over all of a run's events would cost every tool call's commit a page more).
   */
  *eventPages(runId: string, kind?: string, pageSize = 1000): Generator<EventRow> {
    if (kind !== undefined) {
      const page = this.statement('SELECT * FROM events WHERE run_id = ? AND kind = ? AND id > ? ORDER BY id LIMIT ?');
      for (let after = 0; ;) {
        const rows = page.all(runId, kind, after, pageSize) as EventRow[];
        yield* rows;
        if (rows.length < pageSize) return;
        after = rows.at(-1)!.id;
      }
    }
    const kinds = this.statement(
      `WITH RECURSIVE seen(kind) AS (
         SELECT MIN(kind) FROM events WHERE run_id = @run
         UNION ALL SELECT (SELECT MIN(kind) FROM events WHERE run_id = @run AND kind > seen.kind) FROM seen WHERE seen.kind IS NOT NULL)
       SELECT kind FROM seen WHERE kind IS NOT NULL`,
    )
      .pluck()
      .all({ run: runId }) as string[];
    const heads = kinds.map((k) => this.eventPages(runId, k, pageSize)).map((it) => ({ it, next: it.next() }));
    for (;;) {
      let first: (typeof heads)[number] | undefined;
      for (const head of heads) if (!head.next.done && (first === undefined || head.next.value.id < first.next.value!.id)) first = head;
      if (first === undefined) return;
      yield first.next.value!;
      first.next = first.it.next();
    }
  }

  listEvents(runId: string, kind?: string): EventRow[] {
    return kind === undefined
      ? (this.statement('SELECT * FROM events WHERE run_id = ? ORDER BY id').all(runId) as EventRow[])
      : (this.statement('SELECT * FROM events WHERE run_id = ? AND kind = ? ORDER BY id').all(runId, kind) as EventRow[]);
  }

  // jobs

  /**
   * Inserts a running job; its log is `logDir/job-<id>.log`, which `openLog` opens inside the same transaction: a log
   * that cannot be opened leaves no row, never a job recorded as running that never ran.
   */
  insertJob(
    job: Pick<JobRow, 'run_id' | 'kind' | 'command' | 'resources' | 'charged' | 'episodes_requested' | 'owner' | 'created_at'>,
    logDir: string,
    openLog?: (path: string) => void,
  ): JobRow {
    this.localChanges++;
    return this.db
      .transaction(() => {
        const id = Number(
          this.statement(
            `INSERT INTO jobs (run_id, seq, kind, command, state, resources, charged, episodes_requested, log_path, owner, created_at)
             VALUES (@run_id,
               CASE WHEN @kind = 'grading' THEN NULL ELSE (SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs WHERE run_id = @run_id) END,
               @kind, @command, 'running', @resources, @charged, @episodes_requested, '', @owner, @created_at)`,
          ).run(job).lastInsertRowid,
        );
        const logPath = join(logDir, `job-${id}.log`);
        this.statement('UPDATE jobs SET log_path = ? WHERE id = ?').run(logPath, id);
        // A running job changes its run's compute, episodes and stored bytes by the second: its summary is dropped
        // here, once, not at each usage sample (updateJobUsage); none is kept until the job ends (putRunSummaries).
        this.forgetSummary(job.run_id);
        openLog?.(logPath);
        return this.getJob(id)!;
      })
      .immediate();
  }

  getJob(id: number): JobRow | undefined {
    return this.statement('SELECT * FROM jobs WHERE id = ?').get(id) as JobRow | undefined;
  }

  /** A run's agent job by the number the agent knows it by. */
  getJobBySeq(runId: string, seq: number): JobRow | undefined {
    return this.statement('SELECT * FROM jobs WHERE run_id = ? AND seq = ?').get(runId, seq) as JobRow | undefined;
  }

  listJobs(runId: string, kinds?: readonly JobKind[]): JobRow[] {
    const jobs = this.statement('SELECT * FROM jobs WHERE run_id = ? ORDER BY id').all(runId) as JobRow[];
    return kinds === undefined ? jobs : jobs.filter((job) => kinds.includes(job.kind));
  }

  listRunningJobs(): JobRow[] {
    return this.statement(`SELECT * FROM jobs WHERE state = 'running' ORDER BY id`).all() as JobRow[];
  }

  updateJobUsage(id: number, cpuSeconds: number, gpuSeconds: number): void {
    this.localChanges++;
    // Nothing kept changes: the run's summary was dropped when the job started (insertJob) and none is kept while a
    // job runs (putRunSummaries); the job's end drops it again (finishJob).
    this.statement('UPDATE jobs SET cpu_s = ?, gpu_s = ? WHERE id = ?').run(cpuSeconds, gpuSeconds, id);
  }

  /** A job's end changes its run's compute, episodes and stored bytes. */
  private forgetJobsSummary(jobId: number): void {
    const runId = this.statement('SELECT run_id FROM jobs WHERE id = ?').pluck().get(jobId) as string | undefined;
    if (runId !== undefined) this.forgetSummary(runId);
  }

  finishJob(
    id: number,
    end: Pick<JobRow, 'state' | 'reason' | 'exit_code' | 'signal' | 'cpu_s' | 'gpu_s' | 'episodes_done' | 'result' | 'ended_at'>,
  ): void {
    this.localChanges++;
    this.statement(
      `UPDATE jobs SET state = @state, reason = @reason, exit_code = @exit_code, signal = @signal, cpu_s = @cpu_s,
           gpu_s = @gpu_s, episodes_done = @episodes_done, result = @result, ended_at = @ended_at
         WHERE id = @id AND state = 'running'`,
    ).run({ id, ...end });
    this.forgetJobsSummary(id);
  }

  // submissions

  getSubmission(id: number): SubmissionRow | undefined {
    return this.statement('SELECT * FROM submissions WHERE id = ?').get(id) as SubmissionRow | undefined;
  }

  /** A run's submission by the number the agent knows it by. */
  getSubmissionBySeq(runId: string, seq: number): SubmissionRow | undefined {
    return this.statement('SELECT * FROM submissions WHERE run_id = ? AND seq = ?').get(runId, seq) as SubmissionRow | undefined;
  }

  findSubmissionByHash(runId: string, contentHash: string): SubmissionRow | undefined {
    return this.statement('SELECT * FROM submissions WHERE run_id = ? AND content_hash = ?').get(runId, contentHash) as
      SubmissionRow | undefined;
  }

  listSubmissions(runId: string): SubmissionRow[] {
    return this.statement('SELECT * FROM submissions WHERE run_id = ? ORDER BY id').all(runId) as SubmissionRow[];
  }

  listUnfinishedSubmissions(): SubmissionRow[] {
    return this.statement(`SELECT * FROM submissions WHERE state IN ('queued', 'grading') ORDER BY id`).all() as SubmissionRow[];
  }

  /**
   * Inserts a submission unless the run has used `limit` submissions already; the check
   * and the insert are one transaction, so racing submissions cannot pass the cap.
   */
  insertSubmissionWithin(
    limit: number,
    submission: Pick<SubmissionRow, 'run_id' | 'path' | 'note' | 'content_hash' | 'files' | 'bytes' | 'created_at'>,
  ): { inserted: SubmissionRow } | { existing: SubmissionRow } | { capReached: true } {
    this.localChanges++;
    return this.db
      .transaction(() => {
        const existing = this.findSubmissionByHash(submission.run_id, submission.content_hash);
        if (existing) return { existing };
        const used = this.statement('SELECT COUNT(*) AS n FROM submissions WHERE run_id = ?').get(submission.run_id) as { n: number };
        if (used.n >= limit) return { capReached: true as const };
        const id = Number(
          this.statement(
            `INSERT INTO submissions (run_id, seq, path, note, content_hash, files, bytes, state, created_at)
             VALUES (@run_id, @seq, @path, @note, @content_hash, @files, @bytes, 'queued', @created_at)`,
          ).run({ ...submission, seq: used.n + 1 }).lastInsertRowid,
        );
        return { inserted: this.getSubmission(id)! };
      })
      .immediate();
  }

  setSubmissionState(id: number, state: SubmissionState, error: string | null, at: number | null): void {
    this.statement('UPDATE submissions SET state = ?, error = ?, graded_at = ? WHERE id = ?').run(state, error, at, id);
    const runId = this.getSubmission(id)?.run_id;
    if (runId !== undefined) this.forgetSummary(runId);
  }

  // grades

  getGrade(taskId: string, graderVersion: string, contentHash: string): GradeRow | undefined {
    return this.statement('SELECT * FROM grades WHERE task_id = ? AND grader_version = ? AND content_hash = ?').get(
      taskId,
      graderVersion,
      contentHash,
    ) as GradeRow | undefined;
  }

  insertGrade(grade: GradeRow): void {
    this.statement(
      `INSERT OR IGNORE INTO grades (task_id, grader_version, content_hash, public_score, private_score, details, duration_ms, created_at)
         VALUES (@task_id, @grader_version, @content_hash, @public_score, @private_score, @details, @duration_ms, @created_at)`,
    ).run(grade);
    // It may be a baseline: the task's runs summarised without one are summarised again.
    this.countSummaryChange('task', grade.task_id);
    this.statement('DELETE FROM run_summaries WHERE task_id = ? AND has_baseline = 0').run(grade.task_id);
  }

  // judge cache

  getJudgement(key: string): 'a' | 'b' | 'tie' | undefined {
    const row = this.statement('SELECT preference FROM judge_cache WHERE key = ?').get(key) as
      { preference: 'a' | 'b' | 'tie' } | undefined;
    return row?.preference;
  }

  putJudgement(key: string, judge: string, preference: 'a' | 'b' | 'tie'): void {
    this.statement('INSERT OR IGNORE INTO judge_cache (key, judge, preference, created_at) VALUES (?, ?, ?, ?)').run(
      key,
      judge,
      preference,
      Date.now(),
    );
  }

  // integrity checks

  insertIntegrityCheck(check: Omit<IntegrityCheckRow, 'id'>): number {
    const id = Number(
      this.statement(
        'INSERT INTO integrity_checks (run_id, kind, verdict, checker, details, duration_ms, created_at) VALUES (@run_id, @kind, @verdict, @checker, @details, @duration_ms, @created_at)',
      ).run(check).lastInsertRowid,
    );
    this.forgetSummary(check.run_id);
    return id;
  }

  /** A run's latest check of a kind: the one reports and the leaderboard read (earlier ones stay). */
  latestIntegrityCheck(runId: string, kind: IntegrityCheckKind): IntegrityCheckRow | undefined {
    return this.statement('SELECT * FROM integrity_checks WHERE run_id = ? AND kind = ? ORDER BY id DESC LIMIT 1').get(runId, kind) as
      IntegrityCheckRow | undefined;
  }

  // budget

  /**
   * What a run has consumed so far (running jobs count with their latest sample); summed again only after its
   * jobs or submissions may have changed (see {@link changesVersion}).
   */
  usage(runId: string): Readonly<Usage> {
    return this.usageAt(runId, this.changesVersion());
  }

  private usageAt(runId: string, version: string): Readonly<Usage> {
    const cached = this.usages.get(runId);
    if (cached?.version === version) return cached.usage;
    const usage = Object.freeze(this.sumUsage(runId));
    this.usages.set(runId, { version, usage });
    return usage;
  }

  private sumUsage(runId: string): Usage {
    const row = this.statement(
      `SELECT
         -- GPU jobs are charged GPU-seconds, CPU-only jobs CPU-seconds.
         COALESCE(SUM(CASE WHEN charged = 0 THEN 0 WHEN gpu_s > 0 THEN gpu_s ELSE cpu_s END), 0) AS compute,
         COALESCE(SUM(CASE WHEN kind = 'rollouts' THEN
           CASE WHEN state = 'running' THEN episodes_requested ELSE COALESCE(episodes_done, 0) END
         ELSE 0 END), 0) AS episodes,
         (SELECT COUNT(*) FROM submissions WHERE run_id = @run) AS submissions
       FROM jobs WHERE run_id = @run`,
    ).get({ run: runId }) as { compute: number; episodes: number; submissions: number };
    return { computeSeconds: row.compute, rolloutEpisodes: row.episodes, submissions: row.submissions };
  }

  /**
   * Bytes a run put in the server's shared content-addressed stores: its submissions, its
   * distinct code snapshots and its rollouts' trajectories (content shared with other runs
   * is charged to each).
   */
  storedBytes(runId: string): number {
    const row = this.statement(
      `SELECT
           (SELECT COALESCE(SUM(bytes), 0) FROM submissions WHERE run_id = @run) +
           (SELECT COALESCE(SUM(bytes), 0) FROM (
              SELECT DISTINCT json_extract(data, '$.tree') AS tree, json_extract(data, '$.bytes') AS bytes
              FROM events WHERE run_id = @run AND kind = 'snapshot' AND name = 'code')) +
           (SELECT COALESCE(SUM(json_extract(result, '$.trajectories.bytes')), 0) FROM jobs WHERE run_id = @run AND kind = 'rollouts')
           AS bytes`,
    ).get({ run: runId }) as { bytes: number };
    return row.bytes;
  }
}
