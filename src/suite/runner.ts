import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { ownerAlive } from '../../sandbox/process-tree.js';
import type { Engine } from '../core/engine.js';
import { ownerOfThisProcess, ownerPid } from '../core/ownership.js';
import { launchRuns, type LaunchedRun } from '../launch/launcher.js';
import { eventRecorder } from '../store/events.js';
import { A2rlError } from '../util/errors.js';
import { type Cell, cellProgress, cellRuns, interruptedReason, runStanding } from './plan.js';
import { SuiteProgress } from './progress.js';
import type { Suite } from './schema.js';

export interface SuiteRunOptions {
  cells: Cell[];
  parallel: number;
  /** `serve` flags of the runs' servers: the judge and the sandbox backend. */
  serveArgs: string[];
  /** One line for the operator: each run's start and end, and the suite's progress. */
  onLine: (line: string) => void;
  /** Seconds between progress lines (default 5). */
  progressSeconds?: number;
}

export interface SuiteOutcome {
  /** Runs made by this invocation, retries included. */
  launched: LaunchedRun[];
  /** Cells' missing runs whose attempt and its retry both failed for their infrastructure. */
  failed: number;
  /** Stopped by SIGINT or SIGTERM before every missing run was made: run the suite again to go on. */
  interrupted: boolean;
}

/**
 * `a2rl suite run`: makes every cell's missing runs, `parallel` at once, the first repeat of every cell before the
 * second of any. Before that, runs a previous invocation left behind (killed, crashed) are settled and marked
 * interrupted, so they never count and are made again. An infrastructure failure is retried once (the launcher's
 * retry). SIGINT or SIGTERM stops the runs in flight (the launcher passes the signal on) and starts no more.
 */
export async function runSuite(engine: Engine, suite: Suite, options: SuiteRunOptions): Promise<SuiteOutcome> {
  const release = holdSuiteLock(engine.home, suite.name);
  let stopping = false;
  const stop = () => {
    if (!stopping) options.onLine('stopping: the runs in flight are stopped, no more start; a2rl suite run FILE goes on from here');
    stopping = true;
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    await settleLeftRuns(engine, options.cells, options.onLine);
    const before = cellProgress(engine.store, options.cells, suite.repeats);
    // The runs in rounds, each cell's next repeat in the round of its number: a suite stopped halfway has every cell's
    // first runs rather than some cells whole, and one resumed fills the cells that have fewest first.
    const slots = before
      .flatMap(({ cell, done, missing }) => Array.from({ length: missing }, (_, index) => ({ cell, round: done + index })))
      .sort((a, b) => a.round - b.round)
      .map(({ cell }) => cell);
    const progress = new SuiteProgress(
      suite.name,
      before.reduce((sum, cell) => sum + cell.done, 0),
      slots.length,
      options.parallel,
      options.onLine,
      options.progressSeconds ?? 5,
    );
    const launched: LaunchedRun[] = [];
    let failed = 0;
    const limit = pLimit(options.parallel);
    try {
      await Promise.all(
        slots.map((cell) =>
          limit(async () => {
            if (stopping) return;
            const startedAt = progress.started();
            const runs = await launchCell(engine, cell, suite, options).catch((error: unknown) => {
              options.onLine(`${cell.id} on ${cell.task.id}: could not launch: ${(error as Error).message}`);
              return [];
            });
            launched.push(...runs);
            for (const run of runs) markIfInterrupted(engine, run);
            // The retry, where there was one, is the repeat's outcome.
            const last = runs.at(-1);
            const outcome = last?.interrupted ? 'stopped' : last && last.infrastructure_failure === null ? 'done' : 'failed';
            if (outcome === 'failed') failed++;
            progress.finished(outcome, startedAt);
          }),
        ),
      );
    } finally {
      progress.stop();
    }
    return { launched, failed, interrupted: stopping };
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    release();
  }
}

/** One missing run of a cell, and its retry if its infrastructure failed. */
async function launchCell(engine: Engine, cell: Cell, suite: Suite, options: SuiteRunOptions): Promise<LaunchedRun[]> {
  return launchRuns(engine, {
    agent: cell.agent,
    task: cell.task.id,
    baseModel: cell.task.baseModel,
    model: cell.model,
    budget: cell.budget,
    label: cell.label,
    repeats: 1,
    parallel: 1,
    transport: suite.backend.transport,
    graceSeconds: suite.backend.grace_seconds,
    serveArgs: options.serveArgs,
    agentArgs: cell.agentArgs,
    agentBinds: cell.agentBinds,
    agentEnv: cell.agentEnv,
    onLine: (line) => options.onLine(`${cell.id} on ${cell.task.id}: ${line}`),
  });
}

/** A run the operator's signal stopped is no result: marked, so that the next invocation makes it again. */
function markIfInterrupted(engine: Engine, run: LaunchedRun): void {
  if (!run.interrupted || run.infrastructure_failure !== null) return;
  engine.store.markInfrastructureFailure(run.run_id, interruptedReason);
  eventRecorder(engine.store, run.run_id, engine.store.getRun(run.run_id)!.created_at)('run', 'infrastructure_failure', {
    reason: interruptedReason,
  });
}

/**
 * The runs of the suite's cells that a stopped invocation left, marked interrupted. Their servers end them as they
 * would any run: a stdio server when the launcher's bridge is gone, a launcher's `serve --http` when its launcher is
 * (it ends with its parent, `endWithParent`); a run a live server still holds is revoked here, and one whose server is
 * gone is settled here (ended, its gradings done).
 */
async function settleLeftRuns(engine: Engine, cells: readonly Cell[], onLine: (line: string) => void): Promise<void> {
  const left = [...cellRuns(engine.store, cells).values()].flat().filter((run) => runStanding(engine.store, run) === 'unsettled');
  for (const run of left) {
    const record = eventRecorder(engine.store, run.id, run.created_at);
    if (engine.isRemote(run.id)) {
      if (engine.store.revokeRun(run.id, interruptedReason, Date.now())) record('run', 'ended', { reason: interruptedReason });
    } else if (!ownerAlive(run.owner)) {
      await engine.settleAbandonedRun(run.id, interruptedReason);
    }
    engine.store.markInfrastructureFailure(run.id, interruptedReason);
    record('run', 'infrastructure_failure', { reason: interruptedReason });
  }
  if (left.length) onLine(`${left.length} runs left by a stopped invocation marked interrupted (not counted); they are made again`);
  await engine.grader.drain();
}

/** One invocation of a suite at a time on a home: a second would make the same missing runs twice. */
function holdSuiteLock(home: string, name: string): () => void {
  const dir = join(home, 'suites');
  mkdirSync(dir, { recursive: true });
  const lock = join(dir, `${name}.lock`);
  const owner = ownerOfThisProcess();
  try {
    writeFileSync(lock, owner, { flag: 'wx' });
  } catch {
    const holder = readFileSync(lock, 'utf8').trim();
    if (ownerAlive(holder)) {
      throw new A2rlError('CONFLICT', `Suite ${name} is being run by pid ${ownerPid(holder)} on this home; wait for it, or stop it first.`);
    }
    // Its holder is gone (killed, crashed): the lock is stale.
    writeFileSync(lock, owner);
  }
  return () => rmSync(lock, { force: true });
}
