import { readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { setPriority } from 'node:os';
import { HostGuard } from '../mcp/transports/http/auth.js';
import { Store } from '../store/store.js';
import { forward } from './forward.js';
import { createViewHere } from './handler.js';

/**
 * The view's process (issue 49): its own store connection, event loop, heap and garbage collector render every
 * page, leaderboard, live push and export of the view. It serves the browsers' connections the server's front door
 * hands it whole, and, on a Unix socket, the `/view` requests the server forwards from connections it holds; it
 * checks Host and Origin as the server does (a handed connection's requests reach nothing else first), and sends any
 * request not for `/view` on to the server's own socket, closing that connection after the answer. Started by
 * src/view/worker-proxy.ts, which sends it its {@link ViewWorkerData} first; it ends when told `close` or when the
 * server is gone.
 */

/** Who may reach the view: the names a request's Host and Origin may carry (the server's `HostGuard`). */
export interface ViewHosts {
  listen: string;
  allow: string[];
}

/** A connection the server's front door hands over, its socket beside this message: the bytes it read of it. */
export interface HandedConnection {
  /** Base64. */
  head: string;
}

export interface ViewWorkerData {
  storePath: string;
  home: string;
  token: string;
  diskQuotaBytes: number;
  socketPath: string;
  hosts: ViewHosts;
  serverSocket: string;
}

/**
 * Pages yield to the agents' calls: every thread of this process (its event loop and V8's garbage-collection helpers;
 * threads started later, file reads' included, inherit it) runs at nice 19, about 1/70 of a nice-0 thread's share
 * of a busy CPU, and still renders a page a second on an idle one. A thread in the server's process, even niced,
 * would share that process's garbage-collection helpers and file-read threads at the agents' priority. A Linux
 * thread's nice value is its own; where /proc is missing, the process keeps the server's priority.
 */
function yieldToAgents(): void {
  try {
    for (const thread of readdirSync('/proc/self/task')) setPriority(Number(thread), 19);
  } catch {
    // Not Linux, or no /proc: the same priority as the server.
  }
}

/**
 * The view's connection. Opening sets the journal mode before the busy timeout, so a store another process is writing
 * (the server beside it, checkpointing) may answer busy at once: tried again for up to 5 s; this process serves nothing yet.
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

process.once('message', (options: ViewWorkerData) => {
  yieldToAgents();
  const store = openStore(options.storePath);
  const view = createViewHere({ store, home: options.home, token: options.token, diskQuotaBytes: options.diskQuotaBytes });
  const guard = new HostGuard(options.hosts.listen, options.hosts.allow);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== '/view' && !url.pathname.startsWith('/view/')) {
      return forward(req, res, options.serverSocket, (error) => `The server failed to answer: ${error.message}. Try again.`);
    }
    if (guard.refused(req, res)) return;
    void view.handle(req, res, url);
  });
  const close = () => {
    view.close();
    server.close();
    server.closeAllConnections();
    store.close();
    process.exit(0);
  };
  process.on('message', (message: unknown, socket?: Socket) => {
    if (message === 'close') return close();
    if (socket === undefined) return;
    // What the door read comes first, then what the kernel kept for this process.
    socket.unshift(Buffer.from((message as HandedConnection).head, 'base64'));
    server.emit('connection', socket);
    socket.resume();
  });
  // The server went (stopped, or killed): nothing is left to serve.
  process.once('disconnect', close);
  server.listen(options.socketPath, () => process.send!('listening'));
});
