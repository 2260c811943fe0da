import { parentPort, workerData } from 'node:worker_threads';
import { rankBoard } from '../reports/leaderboard.js';
import { summariseEndedRunsYielding } from '../reports/run-summaries.js';
import { Store } from '../store/store.js';

/**
 * The view's ranking thread (src/view/data.ts): at 10⁵ runs a ranking takes seconds and an upgraded store's summaries a
 * minute, so they run here, on a connection of their own, and the view process's event loop goes on answering pages.
 * Each message asks for a ranking; the answer is the ranked board (also kept in the store) or the error's message.
 */
const store = new Store((workerData as { storePath: string }).storePath);
parentPort!.on('message', () => {
  void (async () => {
    try {
      await summariseEndedRunsYielding(store);
      parentPort!.postMessage({ board: rankBoard(store) });
    } catch (error) {
      parentPort!.postMessage({ error: (error as Error).message });
    }
  })();
});
