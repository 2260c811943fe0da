import { parentPort, workerData } from 'node:worker_threads';
import { Store } from '../store/store.js';
import { recordContaminationCheck } from './check.js';

/**
 * The contamination check's thread (src/integrity/background.ts starts it from dist/): its own store connection, one
 * run's check, its verdict recorded, then the verdict posted back.
 */
const { home, storePath, runId } = workerData as { home: string; storePath: string; runId: string };
const store = new Store(storePath);
try {
  const { verdict } = recordContaminationCheck(store, home, runId);
  parentPort?.postMessage({ verdict });
} finally {
  store.close();
}
