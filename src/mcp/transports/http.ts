import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { tools } from '../../../tools/index.js';
import type { Engine } from '../../core/engine.js';
import { A2rlError, type ErrorCode, isA2rlError } from '../../util/errors.js';
import { Metrics } from '../metrics.js';
import type { RecordEvent } from '../../store/events.js';
import { RecordingTransport } from '../recording-transport.js';
import type { Run } from '../../core/run.js';
import { createServer } from '../server.js';
import { adminTokenMatches, bearerToken, issueRunToken, runOfToken } from '../tokens.js';

export interface HttpServeOptions {
  host: string;
  port: number;
  /** More names the Host and Origin headers may carry, besides loopback and `host`. */
  allowHosts: string[];
  /** Enables `POST /runs` for whoever presents it. */
  adminToken?: string;
  /**
   * A Streamable HTTP session without a request for this long is closed: a client that
   * went away without DELETE would otherwise hold its server forever. (An SSE session
   * ends with its stream.)
   */
  sessionIdleMs: number;
}

/** Largest request body; a write_file of the 1 MiB maximum fits with room to spare. */
export const maxBodyBytes = 4 * 2 ** 20;
/** How long shutdown waits for tool calls in flight before closing their sessions. */
const shutdownGraceMs = 10_000;
/** How often runs whose server is gone are adopted, so their budgets are enforced while no agent is connected. */
const adoptIntervalMs = 10_000;

const loopbackNames = ['localhost', '127.0.0.1', '[::1]'];
const wildcardHosts = ['0.0.0.0', '::', '[::]'];
const knownTools = new Set(tools.map((tool) => tool.name));

const statusOfCode: Partial<Record<ErrorCode, number>> = {
  INVALID_INPUT: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  TOO_LARGE: 413,
  UNAVAILABLE: 503,
  SANDBOX_UNAVAILABLE: 503,
};

interface Session {
  kind: 'streamable' | 'sse';
  runId: string;
  recording: RecordingTransport;
  lastRequestAt: number;
}

interface StreamableSession extends Session {
  kind: 'streamable';
  transport: StreamableHTTPServerTransport;
}

interface SseSession extends Session {
  kind: 'sse';
  transport: SSEServerTransport;
}

const createRunBody = z.object({ task: z.string(), budget: z.string().optional(), label: z.string().max(200).optional() }).strict();

export function isLoopback(host: string): boolean {
  return loopbackNames.includes(host) || host === '::1' || host.startsWith('127.');
}

/**
 * Serves every run of the store over MCP Streamable HTTP (`/mcp`) and the older HTTP+SSE
 * transport (`/sse` + `/messages`) on one port, until SIGTERM or SIGINT. A run token
 * selects the run; each MCP session gets its own server bound to it. Runs outlive their
 * sessions and this process: shutdown stops jobs but ends no run.
 */
/** How long an idle client connection stays open. */
export const keepAliveSeconds = 65;

export async function serveHttp(engine: Engine, options: HttpServeOptions): Promise<void> {
  const sessions = new Map<string, StreamableSession | SseSession>();
  const metrics = new Metrics({
    runsActive: () => engine.activeRunCount(),
    jobsRunning: () => engine.jobs.runningCount,
    sessionsOpen: () => sessions.size,
  });
  const allowedHosts = new Set([...loopbackNames, ...options.allowHosts.map((h) => h.toLowerCase())]);
  if (!wildcardHosts.includes(options.host)) allowedHosts.add(urlHost(options.host));
  let stopping = false;
  let baseUrl = '';

  /** The run's record, also feeding the tool-call metrics. */
  const recordFor =
    (run: Run): RecordEvent =>
    (kind, name, data) => {
      run.record(kind, name, data);
      if (kind !== 'tool') return;
      const { error, duration_ms } = data as { error?: unknown; duration_ms: number };
      metrics.observeToolCall(knownTools.has(name) ? name : 'unknown', error === undefined ? 'ok' : 'error', duration_ms / 1000);
    };

  function checkHostAndOrigin(req: IncomingMessage): void {
    const host = hostnameOf(`http://${req.headers.host ?? ''}`);
    if (host === undefined || !allowedHosts.has(host)) {
      throw new A2rlError(
        'FORBIDDEN',
        `Host "${req.headers.host ?? ''}" is not served here (DNS-rebinding protection); the operator can allow it with --allow-host.`,
      );
    }
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null' && !allowedHosts.has(hostnameOf(origin) ?? '')) {
      throw new A2rlError('FORBIDDEN', `Origin "${origin}" is not allowed; the operator can allow its host with --allow-host.`);
    }
  }

  /** The run the request's bearer token opens. */
  function authenticate(req: IncomingMessage): string {
    const token = bearerToken(req.headers.authorization);
    if (token === undefined) {
      throw new A2rlError(
        'UNAUTHORIZED',
        'Send "Authorization: Bearer <run token>"; an operator creates runs and tokens with a2rl runs create.',
      );
    }
    const runId = runOfToken(engine.store, token);
    if (runId === undefined)
      throw new A2rlError('UNAUTHORIZED', 'The bearer token is not valid: unknown or revoked. Ask the operator for a token.');
    return runId;
  }

  function sessionFor(id: string, runId: string): StreamableSession | SseSession {
    const session = sessions.get(id);
    // Another run's session is reported as unknown: a token learns nothing about other runs.
    if (!session || session.runId !== runId) {
      throw new A2rlError(
        'NOT_FOUND',
        `No session "${id}" for this token: it closed, was idle too long, or the server restarted. Connect again (initialize).`,
      );
    }
    session.lastRequestAt = Date.now();
    return session;
  }

  async function startStreamableSession(req: IncomingMessage, res: ServerResponse, runId: string, body: unknown): Promise<void> {
    if (!isInitializeRequest(body)) {
      throw new A2rlError('INVALID_INPUT', 'No Mcp-Session-Id header: a new session starts with an initialize request.');
    }
    const run = await engine.remoteRun(runId);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (id) => void sessions.set(id, { kind: 'streamable', runId, transport, recording, lastRequestAt: Date.now() }),
    });
    const recording = new RecordingTransport(transport, recordFor(run));
    recording.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await createServer(run).connect(recording);
    await transport.handleRequest(req, res, body);
  }

  async function handleStreamable(req: IncomingMessage, res: ServerResponse, runId: string): Promise<void> {
    const sessionId = req.headers['mcp-session-id'];
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    if (typeof sessionId !== 'string') {
      if (req.method !== 'POST') throw new A2rlError('INVALID_INPUT', `${req.method} /mcp needs the Mcp-Session-Id header of a session.`);
      return startStreamableSession(req, res, runId, body);
    }
    const session = sessionFor(sessionId, runId);
    if (session.kind !== 'streamable') {
      throw new A2rlError(
        'INVALID_INPUT',
        `Session ${sessionId} is an HTTP+SSE session: post its messages to /messages?sessionId=${sessionId}, or start a Streamable HTTP session at /mcp.`,
      );
    }
    await session.transport.handleRequest(req, res, body);
  }

  async function startSseSession(res: ServerResponse, runId: string): Promise<void> {
    const run = await engine.remoteRun(runId);
    const transport = new SSEServerTransport('/messages', res);
    const recording = new RecordingTransport(transport, recordFor(run));
    sessions.set(transport.sessionId, { kind: 'sse', runId, transport, recording, lastRequestAt: Date.now() });
    recording.onclose = () => sessions.delete(transport.sessionId);
    await createServer(run).connect(recording);
  }

  async function handleSseMessage(req: IncomingMessage, res: ServerResponse, runId: string, url: URL): Promise<void> {
    const sessionId = url.searchParams.get('sessionId');
    if (!sessionId) throw new A2rlError('INVALID_INPUT', 'POST /messages needs ?sessionId= from the endpoint event of GET /sse.');
    const session = sessionFor(sessionId, runId);
    if (session.kind !== 'sse') {
      throw new A2rlError(
        'INVALID_INPUT',
        `Session ${sessionId} is a Streamable HTTP session: send its messages to /mcp with the Mcp-Session-Id header.`,
      );
    }
    await session.transport.handlePostMessage(req, res, await readJson(req));
  }

  async function createRunOverHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (options.adminToken === undefined) {
      throw new A2rlError(
        'FORBIDDEN',
        'Creating runs over HTTP is off: start the server with A2RL_ADMIN_TOKEN set, or use a2rl runs create.',
      );
    }
    const presented = bearerToken(req.headers.authorization);
    if (presented === undefined || !adminTokenMatches(options.adminToken, presented)) {
      throw new A2rlError('UNAUTHORIZED', 'POST /runs needs "Authorization: Bearer <admin token>".');
    }
    const parsed = createRunBody.safeParse(await readJson(req));
    if (!parsed.success) {
      throw new A2rlError(
        'INVALID_INPUT',
        `Send JSON {"task": "micro-gsm8k", "budget"?: "wall=30m", "label"?: "..."}: ${z.prettifyError(parsed.error)}`,
      );
    }
    const run = await engine.createRun({ taskId: parsed.data.task, budget: parsed.data.budget, label: parsed.data.label });
    const token = issueRunToken(engine.store, run.id);
    sendJson(res, 201, {
      run_id: run.id,
      token,
      task: run.task.id,
      budget: run.limits,
      mcp_url: `${baseUrl}/mcp`,
      sse_url: `${baseUrl}/sse`,
    });
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    checkHostAndOrigin(req);
    const url = new URL(req.url ?? '/', 'http://localhost');
    const endpoint = `${req.method} ${url.pathname}`;
    if (endpoint === 'GET /healthz') return sendText(res, 200, 'ok\n');
    if (endpoint === 'GET /metrics') return sendText(res, 200, metrics.render(), 'text/plain; version=0.0.4');
    if (stopping) throw new A2rlError('UNAVAILABLE', 'The server is shutting down; connect again in a moment, your run goes on.');
    if (endpoint === 'POST /runs') return createRunOverHttp(req, res);
    if (url.pathname === '/mcp') return handleStreamable(req, res, authenticate(req));
    if (endpoint === 'GET /sse') return startSseSession(res, authenticate(req));
    if (endpoint === 'POST /messages') return handleSseMessage(req, res, authenticate(req), url);
    throw new A2rlError(
      'NOT_FOUND',
      `Nothing at ${endpoint}. Endpoints: /mcp (MCP Streamable HTTP), GET /sse + POST /messages (HTTP+SSE), GET /healthz, GET /metrics, POST /runs.`,
    );
  }

  const server = createHttpServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (!isA2rlError(error) || statusOfCode[error.code] === undefined)
        engine.logger.error({ err: error, url: req.url }, 'HTTP request failed');
      if (res.headersSent) return void res.end();
      const status = isA2rlError(error) ? (statusOfCode[error.code] ?? 500) : 500;
      const message = isA2rlError(error) ? error.message : 'The server failed on this request; try again, and report it if it persists.';
      if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
      // A refused body is not read: close the connection rather than wait for the rest of it.
      if (status === 413) res.setHeader('Connection', 'close');
      sendJson(res, status, { error: isA2rlError(error) ? error.code : 'INTERNAL', message });
    });
  });

  // Agents think for seconds to minutes between calls. With Node's 5 s default, a busy host (the agent's own jobs on
  // every core) lets the server close an idle connection just as the client reuses it, and the call fails.
  server.keepAliveTimeout = keepAliveSeconds * 1000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  baseUrl = `http://${urlHost(wildcardHosts.includes(options.host) ? '127.0.0.1' : options.host)}:${port}`;
  if (!isLoopback(options.host)) {
    process.stderr.write(
      `a2rl: warning: listening on ${options.host}, reachable from other machines. Tokens travel in clear text unless a TLS proxy fronts this server; allow the names clients use with --allow-host.\n`,
    );
  }
  process.stderr.write(`a2rl: listening on ${baseUrl} (MCP Streamable HTTP at /mcp, HTTP+SSE at /sse)\n`);
  engine.logger.info({ url: baseUrl, allowed_hosts: [...allowedHosts], max_jobs: engine.services.limits.maxJobs }, 'serving MCP over HTTP');

  await engine.adoptOrphanedRuns();
  const adopter = setInterval(() => void engine.adoptOrphanedRuns(), adoptIntervalMs);
  adopter.unref();
  const closeIdleAndRevokedSessions = () => {
    const idleSince = Date.now() - options.sessionIdleMs;
    for (const [id, session] of sessions) {
      const revoked = engine.store.getRunToken(session.runId)?.revoked_at != null;
      const idle = session.kind === 'streamable' && session.lastRequestAt <= idleSince && session.recording.callsInFlight === 0;
      if (!revoked && !idle) continue;
      engine.logger.info({ session: id, run: session.runId, revoked }, 'closing a session');
      void session.recording.close();
    }
  };
  const idleSweeper = setInterval(closeIdleAndRevokedSessions, Math.min(10_000, options.sessionIdleMs / 2));
  idleSweeper.unref();

  const signal = await new Promise<string>((resolve) => {
    for (const name of ['SIGINT', 'SIGTERM'] as const) process.once(name, () => resolve(name));
  });
  stopping = true;
  clearInterval(adopter);
  clearInterval(idleSweeper);
  engine.logger.info({ signal }, 'shutting down: no new sessions, waiting for tool calls in flight');
  server.close();
  const deadline = Date.now() + shutdownGraceMs;
  const callsInFlight = () => [...sessions.values()].reduce((n, s) => n + s.recording.callsInFlight, 0);
  while (callsInFlight() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  for (const session of [...sessions.values()]) await session.recording.close();
  server.closeAllConnections();
  await engine.close();
  process.stderr.write(`a2rl: stopped (${signal}); runs stay active and resume when this server starts again\n`);
}

/** A host as it appears in a URL: IPv6 addresses bracketed, lower case. */
function urlHost(host: string): string {
  return (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host).toLowerCase();
}

function hostnameOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase() || undefined;
  } catch {
    return undefined;
  }
}

/** Reads a JSON body of at most `maxBodyBytes`. */
async function readJson(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? 0);
  const tooLarge = () =>
    new A2rlError(
      'TOO_LARGE',
      `The request body is over ${maxBodyBytes / 2 ** 20} MiB; send less per call (e.g. split a file into parts).`,
    );
  if (declared > maxBodyBytes) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBodyBytes) throw tooLarge();
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw new A2rlError('INVALID_INPUT', `The request body is not JSON (${(error as Error).message}).`);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
}

function sendText(res: ServerResponse, status: number, text: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': contentType }).end(text);
}
