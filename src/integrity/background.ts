import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import pLimit from 'p-limit';
import { packageRoot } from '../util/paths.js';

/** The worker's compiled entry: the same file whether the server runs from dist or its sources (tests build dist first). */
const workerEntry = join(packageRoot, 'dist', 'src', 'integrity', 'worker.js');

/**
 * How long, and with how much heap, one check may run: 1 GB of text takes about 35 CPU-seconds and 386 MiB
 * (docs/ARCHITECTURE.md, invariant 12), but the agent wrote what is read, and text made to match many hidden items'
 * first tokens at every position costs far more per byte. Past either, the worker is stopped and the check recorded
 * as failed, so that one run cannot hold back the checks of the runs after it (they wait their turn) for ever.
 */
const checkLimits = { timeMs: 30 * 60_000, heapMb: 2048 };

/**
 * Contamination checks of ended runs, each in a worker thread (never on the server's event loop), one at a time: a
 * check reads everything the run wrote, so several at once would only compete for the disk. `drain()` waits for
 * those started, so a server that ends a run and exits (stdio) still records its verdict.
 */
export class IntegrityChecks {
  private readonly limit = pLimit(1);
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly home: string,
    private readonly storePath: string,
    /** Told of a check whose worker did not finish (crashed, or past `checkLimits`): the worker recorded nothing. */
    private readonly onError: (runId: string, error: Error, elapsedMs: number) => void,
  ) {}

  /** Starts the run's check; its verdict lands in the store's integrity_checks. Never throws: a failure is reported to `onError`. */
  start(runId: string): void {
    const done = this.limit(async () => {
      const started = Date.now();
      await this.inWorker(runId).catch((error: unknown) => this.onError(runId, error as Error, Date.now() - started));
    });
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }

  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  private inWorker(runId: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const worker = new Worker(workerEntry, {
        workerData: { home: this.home, storePath: this.storePath, runId },
        resourceLimits: { maxOldGenerationSizeMb: checkLimits.heapMb },
      });
      let answered = false;
      const timer = setTimeout(() => {
        reject(new Error(`the check ran past ${checkLimits.timeMs / 60_000} minutes and was stopped`));
        void worker.terminate();
      }, checkLimits.timeMs);
      timer.unref();
      worker.once('message', () => (answered = true));
      worker.once('error', reject);
      worker.once('exit', (code) => {
        clearTimeout(timer);
        if (answered && code === 0) resolve();
        else reject(new Error(`the check's worker exited with code ${code}`));
      });
    });
  }
}
