import { readlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { Store } from '../store/store.js';
import { createViewHere } from './handler.js';

/**
 * The view's thread (issue 49): its own store connection and its own event loop render every page, leaderboard, live
 * push and export of the view, and answer them on a Unix socket the server's thread forwards `/view` to; the thread
 * that answers agents' calls only passes bytes. Started by src/view/worker-proxy.ts.
 */

export interface ViewWorkerData {
  storePath: string;
  home: string;
  token: string;
  diskQuotaBytes: number;
  socketPath: string;
}

// Pages yield to the server's own thread, as local search does (src/search/providers/local-worker.ts): nice 10 weighs
// about a tenth of the agents' thread on a busy host, and still renders a page a second. A thread's nice value is its
// own on Linux; where /proc/thread-self is missing, it keeps the server's.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
} catch {
  // Not Linux, or no /proc: the same priority as the server.
}

/**
 * The view's connection. Opening sets the journal mode before the busy timeout, so a store another process is writing
 * (the server beside it, checkpointing) may answer busy at once: tried again for up to 5 s; this thread serves nothing yet.
 */
function openStore(path: string): Store {
  for (let attempt = 1; ; attempt++) {
    try {
      return new Store(path);
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || attempt === 50) throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    }
  }
}

const options = workerData as ViewWorkerData;
const store = openStore(options.storePath);
const view = createViewHere({ store, home: options.home, token: options.token, diskQuotaBytes: options.diskQuotaBytes });
const server = createServer((req, res) => void view.handle(req, res, new URL(req.url ?? '/', 'http://localhost')));
server.listen(options.socketPath, () => parentPort!.postMessage('listening'));
parentPort!.on('message', (message: unknown) => {
  if (message !== 'close') return;
  view.close();
  server.close();
  server.closeAllConnections();
  store.close();
  parentPort!.close();
});
