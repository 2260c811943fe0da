import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { Engine } from '../../../core/engine.js';
import { A2rlError, type ErrorCode, isA2rlError } from '../../../util/errors.js';
import { maxMessageBytes } from '../../message-limit.js';
import type { Metrics } from '../../metrics.js';
import { issueRunToken, type RunTokenCache } from '../../tokens.js';
import { authenticateAdmin, authenticateRun, type HostGuard } from './auth.js';
import type { SessionTable } from './sessions.js';

/** Largest request body: one MCP message, the same bound as over stdio. */
const maxBodyBytes = maxMessageBytes;

/** The HTTP status of each refusal, for every page the server answers (the view's too). */
export const statusOfCode: Partial<Record<ErrorCode, number>> = {
  INVALID_INPUT: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  TOO_LARGE: 413,
  UNAVAILABLE: 503,
  SANDBOX_UNAVAILABLE: 503,
};

const createRunBody = z.object({ task: z.string(), budget: z.string().optional(), label: z.string().max(200).optional() }).strict();

/** What the routes serve from. */
export interface RouteContext {
  engine: Engine;
  sessions: SessionTable;
  tokens: RunTokenCache;
  guard: HostGuard;
  metrics: Metrics;
  adminToken?: string;
  /** The operator's web view under `/view` (src/view/), when the server serves it. */
  view?: MountedHandler;
  /** `http://host:port` once listening. */
  baseUrl: () => string;
  stopping: () => boolean;
}

/** A handler the server mounts under a path, handed in by whoever starts it (the view is a layer above this one). */
export type MountedHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void>;

/** The paths MCP clients speak JSON-RPC on: their errors are JSON-RPC error objects, as the SDK's own are. */
const mcpPaths = ['/mcp', '/sse', '/messages'];
/** The methods of Streamable HTTP: messages, the server's stream, the session's end. */
const mcpMethods = ['GET', 'POST', 'DELETE'];

/** A request body that is not JSON: a JSON-RPC parse error. */
class BodyNotJson extends A2rlError {}

/**
 * The JSON-RPC error code of a refusal on an MCP path: the spec's parse error and invalid request, the SDK's "session
 * not found" (-32001) for an unknown session, and its generic server error (-32000) for the rest.
 */
function jsonRpcCodeOf(error: unknown): number {
  if (error instanceof BodyNotJson) return -32700;
  if (isA2rlError(error, 'INVALID_INPUT')) return -32600;
  if (isA2rlError(error, 'NOT_FOUND')) return -32001;
  return -32000;
}

/**
 * The server's request handler: every endpoint, and errors with their HTTP status, as JSON-RPC error objects on the MCP
 * paths (`[CODE] message`, the code also in `error.data.code`, as tools answer) and as `{error, message}` elsewhere.
 */
export function requestHandler(context: RouteContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    route(context, req, res).catch((error: unknown) => {
      if (!isA2rlError(error) || statusOfCode[error.code] === undefined)
        context.engine.logger.error({ err: error, url: req.url }, 'HTTP request failed');
      if (res.headersSent) return void res.end();
      const status = isA2rlError(error) ? (statusOfCode[error.code] ?? 500) : 500;
      const code = isA2rlError(error) ? error.code : 'INTERNAL';
      const message = isA2rlError(error) ? error.message : 'The server failed on this request; try again, and report it if it persists.';
      if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
      // A refused body is not read: close the connection rather than wait for the rest of it.
      if (status === 413) res.setHeader('Connection', 'close');
      if (mcpPaths.includes(new URL(req.url ?? '/', 'http://localhost').pathname)) {
        const refusal = { code: jsonRpcCodeOf(error), message: `[${code}] ${message}`, data: { code } };
        return sendJson(res, status, { jsonrpc: '2.0', id: null, error: refusal });
      }
      sendJson(res, status, { error: code, message });
    });
  };
}

async function route(context: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { sessions } = context;
  context.guard.check(req);
  const url = new URL(req.url ?? '/', 'http://localhost');
  const endpoint = `${req.method} ${url.pathname}`;
  if (endpoint === 'GET /healthz') return sendText(res, 200, 'ok\n');
  if (endpoint === 'GET /metrics') return sendText(res, 200, context.metrics.render(), 'text/plain; version=0.0.4');
  if (context.stopping()) throw new A2rlError('UNAVAILABLE', 'The server is shutting down; connect again in a moment, your run goes on.');
  if (endpoint === 'POST /runs') return createRunOverHttp(context, req, res);
  if (context.view && (url.pathname === '/view' || url.pathname.startsWith('/view/'))) return context.view(req, res, url);
  if (url.pathname === '/mcp') {
    if (!mcpMethods.includes(req.method ?? '')) {
      res.setHeader('Allow', mcpMethods.join(', '));
      return sendJson(res, 405, {
        jsonrpc: '2.0',
        id: null,
        error: { code: -32000, message: `Method not allowed: ${req.method} /mcp. Streamable HTTP takes ${mcpMethods.join(', ')}.` },
      });
    }
    const runId = authenticateRun(context.tokens, req);
    return sessions.handleStreamable(req, res, runId, req.method === 'POST' ? await readJson(req) : undefined);
  }
  if (endpoint === 'GET /sse') return sessions.startSse(res, authenticateRun(context.tokens, req));
  if (endpoint === 'POST /messages') {
    const runId = authenticateRun(context.tokens, req);
    return sessions.handleSseMessage(req, res, runId, url.searchParams.get('sessionId'), await readJson(req));
  }
  throw new A2rlError(
    'NOT_FOUND',
    `Nothing at ${endpoint}. Endpoints: /mcp (MCP Streamable HTTP), GET /sse + POST /messages (HTTP+SSE), GET /healthz, GET /metrics, POST /runs, GET /view (the operator's web view).`,
  );
}

async function createRunOverHttp(context: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  authenticateAdmin(context.adminToken, req);
  const parsed = createRunBody.safeParse(await readJson(req));
  if (!parsed.success) {
    throw new A2rlError(
      'INVALID_INPUT',
      `Send JSON {"task": "micro-gsm8k", "budget"?: "wall=30m", "label"?: "..."}: ${z.prettifyError(parsed.error)}`,
    );
  }
  const run = await context.engine.createRun({ taskId: parsed.data.task, budget: parsed.data.budget, label: parsed.data.label });
  const token = issueRunToken(context.engine.store, run.id);
  const baseUrl = context.baseUrl();
  sendJson(res, 201, {
    run_id: run.id,
    token,
    task: run.task.id,
    budget: run.limits,
    mcp_url: `${baseUrl}/mcp`,
    sse_url: `${baseUrl}/sse`,
  });
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
    throw new BodyNotJson('INVALID_INPUT', `The request body is not JSON (${(error as Error).message}).`);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
}

function sendText(res: ServerResponse, status: number, text: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': contentType }).end(text);
}
