import { join } from 'node:path';
import Database from 'better-sqlite3';
import { unmountWorkspace } from '../../sandbox/run-storage.js';
import { ownerAlive } from '../../sandbox/process-tree.js';
import { Store } from '../store/store.js';
import { checkBusyExitCode, checkStoreExitCode, takeCheckLock } from './background.js';
import { recordContaminationCheck } from './check.js';

/**
 * The contamination check's own process (src/integrity/background.ts starts it from dist/, under its limits, in a
 * session of its own): its own store connection, one run's check, its verdict recorded. Whatever a file does to it (an
 * abort, running out of memory) ends this process, never the server; the server then records the check as incomplete.
 * It outlives a server that stops meanwhile, and records its verdict itself.
 */
const [storePath, home, runId] = process.argv.slice(2) as [string, string, string];
// The server that reads its stderr may be gone: writing there must not end the check.
process.stderr.on('error', () => undefined);

/** How long this process waits for a busy store (a server recording many tool calls), well past a server's 5 s. */
const storeBusyTimeoutMs = 120_000;

/** Whether an error is the store's (busy, full, failing disk) rather than the run's: not the run's fault, so checked again. */
function isStoreError(error: unknown): boolean {
  return error instanceof Database.SqliteError;
}

let store: Store | undefined;
try {
  store = new Store(storePath);
  store.db.pragma(`busy_timeout = ${storeBusyTimeoutMs}`);
  const run = store.getRun(runId);
  // Held until the check is recorded (the kernel drops it however this process ends).
  const lock = takeCheckLock(run?.dir ?? join(home, 'runs', runId));
  if (!lock) {
    process.stderr.write(`another process is checking run ${runId}; it records the verdict\n`);
    process.exit(checkBusyExitCode);
  }
  recordContaminationCheck(store, home, runId);
  // A workspace its stopped server left mounted, for this check: unmounted once nothing serves the run.
  if (run) await unmountWorkspace(run.dir, () => ownerAlive(store!.getRun(runId)!.owner));
  lock.close();
} catch (error) {
  if (!isStoreError(error)) throw error;
  process.stderr.write(`the check could not use the store: ${(error as Error).message}\n`);
  process.exitCode = checkStoreExitCode;
} finally {
  store?.close();
}
