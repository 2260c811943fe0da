import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { type IncomingHttpHeaders, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../util/paths.js';
import { createViewHere, type View, type ViewOptions } from './handler.js';
import type { ViewWorkerData } from './worker.js';

/**
 * The view process's compiled entry: this file's sibling when it runs compiled (wherever it was built to, so the view
 * never runs another build's code); from its sources (tests), which node cannot start, dist's (tests build dist first).
 */
const compiledSibling = fileURLToPath(new URL('./worker.js', import.meta.url));
const workerEntry = existsSync(compiledSibling) ? compiledSibling : join(packageRoot, 'dist', 'src', 'view', 'worker.js');

/** Headers of one hop, never forwarded (RFC 9110, 7.6.1). */
const hopHeaders = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/** The views' socket folders, removed when the process exits (a server that never calls `close` leaves none behind). */
const folders = new Set<string>();
process.once('exit', () => folders.forEach((folder) => rmSync(folder, { recursive: true, force: true })));

const endToEnd = (headers: IncomingHttpHeaders) => Object.fromEntries(Object.entries(headers).filter(([name]) => !hopHeaders.has(name)));

/**
 * The view, off the process that answers agents (invariant 9): a process at nice 19 with its own store connection
 * renders every page (src/view/worker.ts); this thread forwards each `/view` request to it over a Unix socket in a
 * private folder and streams the answer back (live pages included), so no page, leaderboard or export can hold a tool
 * call. The view process starts with the server; one that stopped is started again by the next request. An in-memory store cannot be opened twice:
 * its view is served here.
 */
export function createView(options: ViewOptions): View {
  if (options.store.path === ':memory:') return createViewHere(options);
  const folder = mkdtempSync(join(tmpdir(), 'a2rl-view-'));
  folders.add(folder);
  const socketPath = join(folder, 'view.sock');
  let worker: { child: ChildProcess; ready: Promise<void> } | undefined;

  const start = () => {
    const data: ViewWorkerData = {
      storePath: options.store.path,
      home: options.home,
      token: options.token,
      diskQuotaBytes: options.diskQuotaBytes,
      socketPath,
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
    const started = { child, ready };
    // A process that failed or exited is replaced at the next request.
    const forget = () => void (worker === started && (worker = undefined));
    child.on('error', forget).on('exit', forget);
    ready.catch(forget);
    return started;
  };

  // Started with the server, not at the first page (which would pay its start-up); the server does not wait for it.
  worker = start();

  const forward = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    worker ??= start();
    try {
      await worker.ready;
    } catch (error) {
      res
        .writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8' })
        .end(`The view could not start: ${(error as Error).message}. Reload the page.`);
      return;
    }
    const upstream = request({ socketPath, method: req.method, path: req.url, headers: endToEnd(req.headers) }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
      // Live pages are streams: each push is passed on as it comes.
      res.flushHeaders();
      answer.pipe(res);
    });
    upstream.on('error', (error) => {
      if (res.headersSent) return void res.destroy();
      res
        .writeHead(502, { 'Content-Type': 'text/plain; charset=utf-8' })
        .end(`The view failed to answer: ${error.message}. Reload the page.`);
    });
    // A page closed before its answer ended (a live page left): the view's side is closed too.
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  };

  return {
    handle: (req, res) => forward(req, res),
    close: () => {
      if (worker?.child.connected) worker.child.send('close');
      worker = undefined;
      rmSync(folder, { recursive: true, force: true });
      folders.delete(folder);
    },
  };
}
