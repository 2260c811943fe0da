import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pLimit from 'p-limit';
import { packageRoot } from '../util/paths.js';

/** The check process's compiled entry: the same file whether the server runs from dist or its sources (tests build dist first). */
const checkEntry = join(packageRoot, 'dist', 'src', 'integrity', 'check-process.js');

/**
 * What one check may take: 1 GB of text takes about 35 CPU-seconds and 386 MiB (docs/ARCHITECTURE.md, invariant 12),
 * but the agent wrote what is read: text made to match many hidden items' first tokens at every position costs far
 * more per byte, and a file can declare what it does not hold (a 130-byte Parquet file declaring 120 M rows aborts V8).
 * The heap is V8's limit; the address space (heap, buffers, Node's own 0.7 GiB of reservations) and the CPU time are
 * the kernel's (prlimit), so nothing the process does escapes them; the wall time is this process's timer.
 */
export const checkLimits = { timeMs: 30 * 60_000, cpuSeconds: 30 * 60, heapMb: 2048, addressSpaceBytes: 6 * 2 ** 30 };
export type CheckLimits = typeof checkLimits;

/**
 * How long a stopping server waits for its checks; past it, the one running goes on without it (in its own session) and
 * records its own verdict, and those queued never start (their runs stay unchecked: `serve --http` and `runs check` check them).
 */
export const stopGraceMs = 5 * 60_000;

/** The check process's exit code when another process holds the run's check lock: it checked nothing and records nothing. */
export const checkBusyExitCode = 75;
/** The check process's exit code when the store could not be used (busy, disk full): its run is checked again (`interrupted`). */
export const checkStoreExitCode = 76;

/**
 * Takes the run's check lock: one check of a run at a time (a server's, another server's, `runs check`), so that no
 * late verdict overrides a newer one. An exclusive lock on a file of the run's, which the kernel drops when the process
 * ends, however it ends; held while the returned handle is open. Undefined when another process holds it.
 */
export function takeCheckLock(runDir: string): Database.Database | undefined {
  const lock = new Database(join(runDir, 'check.lock'), { timeout: 0 });
  try {
    lock.exec('BEGIN EXCLUSIVE');
    return lock;
  } catch (error) {
    lock.close();
    if ((error as { code?: string }).code === 'SQLITE_BUSY') return undefined;
    throw error;
  }
}

/** Whether a process is checking the run now (holds its check lock): its workspace must stay mounted. */
export function checkInProgress(runDir: string): boolean {
  if (!existsSync(join(runDir, 'check.lock'))) return false;
  const lock = takeCheckLock(runDir);
  lock?.close();
  return lock === undefined;
}

/** Why a check did not finish, as its run's incomplete verdict says; `interrupted`: not the run's fault, so `serve --http` checks it again. */
export interface UnfinishedCheck {
  reason: string;
  elapsedMs: number;
  interrupted: boolean;
}

/**
 * Contamination checks of ended runs, each in a process of its own under `checkLimits` (never in the server's: an
 * abort or an allocation a file provokes ends that process only), one at a time: a check reads everything the run
 * wrote, so several at once would only compete for the disk. A check that does not finish is told to `onUnfinished`,
 * which records it incomplete. Each process runs in a session of its own with no stdio of the server's, so that a
 * client ending a stdio server (the MCP SDK's sends TERM 2 s after closing stdin, then KILL), or a launcher ending the
 * server's process group, does not end the check: it records its own verdict (src/integrity/check-process.ts).
 */
export class IntegrityChecks {
  private readonly limit = pLimit(1);
  private readonly pending = new Set<Promise<void>>();
  private running?: { runId: string; child: ChildProcess; stoppedBecause?: string };
  /** Set once the server stops waiting (`drain`'s grace passed): queued checks never start, the running one is left to itself. */
  private left = false;

  constructor(
    private readonly home: string,
    private readonly storePath: string,
    private readonly onUnfinished: (runId: string, unfinished: UnfinishedCheck) => void,
    private readonly limits: CheckLimits = checkLimits,
  ) {}

  /**
   * Queues the run's check; its verdict lands in the store's integrity_checks. Never throws. `recorded` is called once
   * the check's process has ended and what it left (a verdict, or the incomplete row of one that did not finish) is
   * recorded, or could not be, or the check never started: its run's workspace has no reader left.
   */
  start(runId: string, recorded?: () => void): void {
    const done = this.limit(async () => {
      try {
        // Never started: no row, so the run reads unchecked (not clean) until `serve --http` or `runs check` checks it.
        if (this.left) return;
        const started = Date.now();
        const unfinished = await this.inProcess(runId);
        if (unfinished && !this.left) this.onUnfinished(runId, { ...unfinished, elapsedMs: Date.now() - started });
      } finally {
        // Its process has ended however its record went (a store that failed it included): nothing reads the workspace now.
        recorded?.();
      }
    });
    this.pending.add(done);
    void done.catch((error: unknown) => this.logFailure(runId, error)).finally(() => this.pending.delete(done));
  }

  /**
   * Waits for the checks started, at most `graceMs`; then stops waiting: those queued never start and the one running
   * goes on alone (its process records its verdict, or dies and leaves the run unchecked).
   */
  async drain(graceMs = Number.POSITIVE_INFINITY): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      if (Number.isFinite(graceMs)) timer = setTimeout(resolve, graceMs);
    });
    const settled = (async () => {
      while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    })();
    try {
      await Promise.race([settled, graceOver]);
    } finally {
      clearTimeout(timer);
    }
    if (this.pending.size === 0) return;
    this.left = true;
    // Nothing of the check's keeps this process alive: it may exit while the check goes on.
    this.running?.child.unref();
    this.running?.child.stderr?.destroy();
  }

  /** The run whose check is running (left running, after `drain`'s grace). */
  get runningRun(): string | undefined {
    return this.running?.runId;
  }

  /** A check whose unfinished verdict could not be recorded: said on stderr (stdout may be a stdio client's), never an unhandled rejection. */
  private logFailure(runId: string, error: unknown): void {
    process.stderr.write(
      `the contamination check of run ${runId} could not be recorded: ${error instanceof Error ? error.message : String(error)}\n`,
    );
  }

  /** Runs one check in its own process; resolves to why it did not finish, or undefined when it recorded its verdict. */
  private inProcess(runId: string): Promise<Omit<UnfinishedCheck, 'elapsedMs'> | undefined> {
    return new Promise((resolve) => {
      const child = spawn(
        'prlimit',
        [
          `--as=${this.limits.addressSpaceBytes}`,
          `--cpu=${this.limits.cpuSeconds}`,
          '--',
          process.execPath,
          `--max-old-space-size=${this.limits.heapMb}`,
          checkEntry,
          this.storePath,
          this.home,
          runId,
        ],
        // Its own session and process group: no signal meant for the server or its group reaches it.
        { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
      );
      const running: NonNullable<typeof this.running> = { runId, child };
      this.running = running;
      // The end of its stderr: V8's fatal error or the exception that ended it, for the reason recorded.
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr = (stderr + text).slice(-8192)));
      const timer = setTimeout(() => {
        running.stoppedBecause = `the check ran past ${this.limits.timeMs / 1000} s and was stopped`;
        child.kill('SIGKILL');
      }, this.limits.timeMs);
      timer.unref();
      const finish = (unfinished?: Omit<UnfinishedCheck, 'elapsedMs'>) => {
        clearTimeout(timer);
        if (this.running === running) this.running = undefined;
        resolve(unfinished);
      };
      child.once('error', (error) => finish({ reason: `the check's process could not start: ${error.message}`, interrupted: false }));
      child.once('close', (code, signal) => {
        // Recorded its verdict, or another process holds the run's check and records it.
        if (code === 0 || code === checkBusyExitCode) return finish();
        const reason = running.stoppedBecause ?? `the check's process ${exitDescription(code, signal, stderr, this.limits)}`;
        finish({ reason, interrupted: code === checkStoreExitCode });
      });
    });
  }
}

/** Why a check's process ended, in words: the signal or code, and the line of its stderr that says why. */
function exitDescription(code: number | null, signal: NodeJS.Signals | null, stderr: string, limits: CheckLimits): string {
  const lines = stderr
    .split('\n')
    .map((line) => line.replace(/^#\s*/, '').trim())
    .filter((line) => line.length > 0);
  const cause = lines.find((line) => /fatal|out of memory|allocation failed/i.test(line)) ?? lines.at(-1);
  const how =
    signal === 'SIGXCPU'
      ? `used its ${limits.cpuSeconds} CPU-seconds and was stopped`
      : signal === 'SIGKILL'
        ? 'was killed (SIGKILL: out of memory, or by an operator)'
        : signal
          ? `was ended by ${signal}`
          : `exited with code ${code}`;
  return cause ? `${how}: ${cause.slice(0, 300)}` : how;
}
