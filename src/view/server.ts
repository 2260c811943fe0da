import { createServer } from 'node:http';
import { HostGuard, isLoopback, urlHost, wildcardHosts } from '../mcp/transports/http/auth.js';
import { openFrontDoor, privateServerSocket } from '../mcp/transports/http/front-door.js';
import { defaultDiskQuotaBytes } from '../core/engine.js';
import type { Store } from '../store/store.js';
import { createView } from './worker-proxy.js';
import { loginCode } from './token.js';

export interface ViewServeOptions {
  store: Store;
  home: string;
  token: string;
  host: string;
  port: number;
  allowHosts: string[];
}

/** The view listening: where, and how to stop it. */
export interface ViewServer {
  baseUrl: string;
  close(): void;
}

/**
 * The view on its own port, as `a2rl view` serves it: the front door joins each connection whose first request is for
 * `/view` to the view's process whole; this process's server answers the rest (`/` goes to the view) and forwards a
 * `/view` request that comes on a connection it holds.
 */
export async function openView(options: ViewServeOptions): Promise<ViewServer> {
  const serverSocket = privateServerSocket();
  const view = createView({
    store: options.store,
    home: options.home,
    token: options.token,
    diskQuotaBytes: defaultDiskQuotaBytes,
    hosts: { listen: options.host, allow: options.allowHosts },
    serverSocket,
  });
  const guard = new HostGuard(options.host, options.allowHosts);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (guard.refused(req, res)) return;
    if (url.pathname === '/') return void res.writeHead(303, { Location: '/view' }).end();
    void view.handle(req, res, url);
  });
  const door = await openFrontDoor(server, {
    host: options.host,
    port: options.port,
    serverSocket,
    tunnels: view.openTunnel ? [{ path: '/view', open: view.openTunnel }] : [],
  }).catch((error: unknown) => {
    view.close();
    throw error;
  });
  return {
    baseUrl: `http://${urlHost(wildcardHosts.includes(options.host) ? '127.0.0.1' : options.host)}:${door.address.port}`,
    close: () => {
      door.close();
      view.close();
      server.close();
      server.closeAllConnections();
    },
  };
}

/**
 * `a2rl view`: the view alone, for a home no `serve --http` serves (runs over stdio, `a2rl run` batches). Of the
 * store it writes only what it keeps for its pages (run summaries, ranked boards); the runs' servers write the rest.
 * Stops on SIGINT or SIGTERM.
 */
export async function serveView(options: ViewServeOptions): Promise<void> {
  const { baseUrl, close } = await openView(options);
  if (!isLoopback(options.host)) {
    process.stderr.write(
      `a2rl: warning: the view listens on ${options.host}, reachable from other machines; its token travels in clear text unless a TLS proxy fronts it.\n`,
    );
  }
  process.stderr.write(
    `a2rl: view at ${baseUrl}/view; log in within a minute at ${baseUrl}/view?code=${loginCode(options.token)} (works once; ` +
      `a2rl view-token --link ${baseUrl} prints a fresh link)\n`,
  );
  const signal = await new Promise<string>((resolve) => {
    for (const name of ['SIGINT', 'SIGTERM'] as const) process.once(name, () => resolve(name));
  });
  close();
  process.stderr.write(`a2rl: view stopped (${signal})\n`);
}
