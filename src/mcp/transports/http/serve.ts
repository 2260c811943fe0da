import { createServer as createHttpServer } from 'node:http';
import { tools } from '../../../../tools/index.js';
import type { Engine } from '../../../core/engine.js';
import type { Run } from '../../../core/run.js';
import { GroupCommit } from '../../../store/events.js';
import type { RecordSessionEvent } from '../../recording-transport.js';
import { Metrics } from '../../metrics.js';
import { HostGuard, isLoopback, urlHost, wildcardHosts } from './auth.js';
import { openFrontDoor, privateServerSocket, type Tunnel } from './front-door.js';
import { RunTokenCache } from '../../tokens.js';
import { type MountedHandler, requestHandler } from './routes.js';
import { SessionTable } from './sessions.js';

export interface HttpServeOptions {
  host: string;
  port: number;
  /** More names the Host and Origin headers may carry, besides loopback and `host`. */
  allowHosts: string[];
  /** Enables `POST /runs` for whoever presents it. */
  adminToken?: string;
  /**
   * The operator's web view, served at `/view`: made once the server's private socket is known, to which it sends the
   * requests not its own that come on the connections it is handed.
   */
  view?: (serverSocket: string) => MountedView;
  /**
   * A Streamable HTTP session without a request for this long is closed: a client that
   * went away without DELETE would otherwise hold its server forever. (An SSE session
   * ends with its stream.)
   */
  sessionIdleMs: number;
}

/** What the server mounts at `/view`, handed in by whoever starts it (the view is a layer above this one). */
export interface MountedView {
  /** Answers a `/view` request that came on a connection the server holds. */
  handle: MountedHandler;
  /** Hands whole connections whose first request is for `/view` to a process of its own (a front door's {@link Tunnel}). */
  openTunnel?: Tunnel['open'];
  /** Ends its pages and connections (the server is stopping). */
  close(): void;
}

/** How long shutdown waits for tool calls in flight before closing their sessions. */
const shutdownGraceMs = 10_000;
/** How often runs whose server is gone are adopted, so their budgets are enforced while no agent is connected. */
const adoptIntervalMs = 10_000;

const knownTools = new Set(tools.map((tool) => tool.name));

/** How long an idle client connection stays open. */
export const keepAliveSeconds = 65;

/**
 * Serves every run of the store over MCP Streamable HTTP (`/mcp`) and the older HTTP+SSE
 * transport (`/sse` + `/messages`) on one port, until SIGTERM or SIGINT. A run token
 * selects the run; each MCP session gets its own server bound to it. Runs outlive their
 * sessions and this process: shutdown stops jobs but ends no run.
 */
export async function serveHttp(engine: Engine, options: HttpServeOptions): Promise<void> {
  let stopping = false;
  let baseUrl = '';
  const metrics: Metrics = new Metrics({
    runsActive: () => engine.activeRunCount(),
    jobsRunning: () => engine.jobs.runningCount,
    sessionsOpen: () => sessions.size,
  });
  /**
   * The run's record, also feeding the tool-call metrics. The sessions' events are group
   * committed: answers ready in the same turn of the event loop share one transaction, and
   * each waits for it.
   */
  const commits = new GroupCommit(engine.store);
  const recordFor =
    (run: Run): RecordSessionEvent =>
    (kind, name, data) => {
      if (kind === 'tool') {
        const { error, duration_ms } = data as { error?: unknown; duration_ms: number };
        metrics.observeToolCall(knownTools.has(name) ? name : 'unknown', error === undefined ? 'ok' : 'error', duration_ms / 1000);
      }
      return commits.record(run.id, run.row.created_at, kind, name, data);
    };
  const sessions = new SessionTable(engine, recordFor);
  const guard = new HostGuard(options.host, options.allowHosts);
  const serverSocket = privateServerSocket();
  const view = options.view?.(serverSocket);
  const server = createHttpServer(
    requestHandler({
      engine,
      sessions,
      tokens: new RunTokenCache(engine.store),
      guard,
      metrics,
      adminToken: options.adminToken,
      view: view?.handle,
      baseUrl: () => baseUrl,
      stopping: () => stopping,
    }),
  );

  // Agents think for seconds to minutes between calls. With Node's 5 s default, a busy host (the agent's own jobs on
  // every core) lets the server close an idle connection just as the client reuses it, and the call fails.
  server.keepAliveTimeout = keepAliveSeconds * 1000;

  const door = await openFrontDoor(server, {
    host: options.host,
    port: options.port,
    serverSocket,
    tunnels: view?.openTunnel ? [{ path: '/view', open: view.openTunnel }] : [],
  });
  const { port } = door.address;
  baseUrl = `http://${urlHost(wildcardHosts.includes(options.host) ? '127.0.0.1' : options.host)}:${port}`;
  if (!isLoopback(options.host)) {
    process.stderr.write(
      `a2rl: warning: listening on ${options.host}, reachable from other machines. Tokens travel in clear text unless a TLS proxy fronts this server; allow the names clients use with --allow-host.\n`,
    );
  }
  process.stderr.write(`a2rl: listening on ${baseUrl} (MCP Streamable HTTP at /mcp, HTTP+SSE at /sse)\n`);
  engine.logger.info(
    { url: baseUrl, allowed_hosts: [...guard.allowedHosts], max_jobs: engine.services.limits.maxJobs },
    'serving MCP over HTTP',
  );

  await engine.adoptOrphanedRuns();
  // The runs whose check no server finished (killed mid-check, stopped before it started): checked in the background.
  engine.checkUncheckedRuns();
  const adopter = setInterval(() => void engine.adoptOrphanedRuns(), adoptIntervalMs);
  adopter.unref();
  const idleSweeper = setInterval(
    () => sessions.closeIdleAndRevoked(Date.now() - options.sessionIdleMs),
    Math.min(10_000, options.sessionIdleMs / 2),
  );
  idleSweeper.unref();

  const signal = await new Promise<string>((resolve) => {
    for (const name of ['SIGINT', 'SIGTERM'] as const) process.once(name, () => resolve(name));
  });
  stopping = true;
  clearInterval(adopter);
  clearInterval(idleSweeper);
  engine.logger.info({ signal }, 'shutting down: no new sessions, waiting for tool calls in flight');
  door.close();
  view?.close();
  server.close();
  const deadline = Date.now() + shutdownGraceMs;
  while (sessions.callsInFlight() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  await sessions.closeAll();
  server.closeAllConnections();
  await engine.close();
  process.stderr.write(`a2rl: stopped (${signal}); runs stay active and resume when this server starts again\n`);
}
