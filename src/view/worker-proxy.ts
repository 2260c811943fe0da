import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../util/paths.js';
import type { MountedView } from '../mcp/transports/http/serve.js';
import { createViewHere, type ViewOptions } from './handler.js';
import { forward } from './forward.js';
import type { HandedConnection, ViewHosts, ViewWorkerData } from './worker.js';

/**
 * The view process's compiled entry: this file's sibling when it runs compiled (wherever it was built to, so the view
 * never runs another build's code); from its sources (tests), which node cannot start, dist's (tests build dist first).
 */
const compiledSibling = fileURLToPath(new URL('./worker.js', import.meta.url));
const workerEntry = existsSync(compiledSibling) ? compiledSibling : join(packageRoot, 'dist', 'src', 'view', 'worker.js');

/** The views' socket folders, removed when the process exits (a server that never calls `close` leaves none behind). */
const folders = new Set<string>();
process.once('exit', () => folders.forEach((folder) => rmSync(folder, { recursive: true, force: true })));

export interface ViewProcessOptions extends ViewOptions {
  hosts: ViewHosts;
  /** The server's own socket, where the view sends the requests that are not its own (src/mcp/transports/http/front-door.ts). */
  serverSocket: string;
}

/**
 * The view, off the process that answers agents (invariant 9): a process at nice 19 with its own store connection
 * renders every page (src/view/worker.ts) and serves the connections the server's front door hands it, whole (their
 * sockets passed over its channel). A `/view` request on a connection the server holds is forwarded to it over a Unix
 * socket in a private folder, its answer streamed back, and that connection then closed, so no page, leaderboard or
 * export holds a tool call. The view process starts with the server; one that stopped is started again by the next
 * request or connection. An in-memory store cannot be opened twice: its view is served here.
 */
export function createView(options: ViewProcessOptions): MountedView {
  if (options.store.path === ':memory:') return createViewHere(options);
  const folder = mkdtempSync(join(tmpdir(), 'a2rl-view-'));
  folders.add(folder);
  const socketPath = join(folder, 'view.sock');
  /** The view's process, and the sockets sent to it that are not yet out of this process. */
  let worker: { child: ChildProcess; ready: Promise<void>; handing: Set<Socket> } | undefined;

  const start = () => {
    const data: ViewWorkerData = {
      storePath: options.store.path,
      home: options.home,
      token: options.token,
      diskQuotaBytes: options.diskQuotaBytes,
      socketPath,
      hosts: options.hosts,
      serverSocket: options.serverSocket,
    };
    rmSync(socketPath, { force: true });
    // None of the server's own node flags (a test runner's loaders; NODE_OPTIONS still applies); its errors on the
    // server's stderr. The token goes over the channel, never on a command line.
    const child = fork(workerEntry, [], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.send(data);
    // The server's process may end while its view runs: the view sees its channel close and ends too.
    child.unref();
    child.channel?.unref();
    const ready = new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('error', reject);
      child.once('exit', (code, signal) => reject(new Error(`the view's process exited (${code ?? signal}) before it listened`)));
    });
    const started = { child, ready, handing: new Set<Socket>() };
    // A process that failed or exited is replaced at the next request; the connections still on their way to it close.
    const forget = () => {
      if (worker === started) worker = undefined;
      started.handing.forEach((socket) => socket.destroy());
    };
    child.on('error', forget).on('exit', forget);
    ready.catch(forget);
    return started;
  };

  // Started with the server, not at the first page (which would pay its start-up); the server does not wait for it.
  worker = start();

  /** The view's process once it listens (started again if it stopped); the error if it could not start. */
  const listening = async () => {
    const started = (worker ??= start());
    await started.ready;
    return started;
  };

  return {
    openTunnel: async () => {
      let started: Awaited<ReturnType<typeof listening>>;
      try {
        started = await listening();
      } catch {
        return undefined;
      }
      return (socket: Socket, head: Buffer) => {
        const handed: HandedConnection = { head: head.toString('base64') };
        // This process keeps its copy of the socket until the message is written, then closes it (the connection stays
        // the view's): a copy Node closed itself would wait for the view's acknowledgement, and a view that exits
        // before sending it would leave the connection open for as long as the server runs.
        started.handing.add(socket);
        started.child.send(handed, socket, { keepOpen: true }, () => {
          started.handing.delete(socket);
          socket.destroy();
        });
      };
    },
    handle: async (req: IncomingMessage, res: ServerResponse) => {
      try {
        await listening();
      } catch (error) {
        res
          .writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' })
          .end(`The view could not start: ${(error as Error).message}. Reload the page.`);
        return;
      }
      forward(req, res, socketPath, (error) => `The view failed to answer: ${error.message}. Reload the page.`);
    },
    close: () => {
      if (worker?.child.connected) worker.child.send('close');
      worker = undefined;
      rmSync(folder, { recursive: true, force: true });
      folders.delete(folder);
    },
  };
}
