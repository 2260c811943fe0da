import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Engine } from '../../../core/engine.js';
import type { Run } from '../../../core/run.js';
import { A2rlError } from '../../../util/errors.js';
import { RecordingTransport, type RecordSessionEvent } from '../../recording-transport.js';
import { createServer } from '../../server.js';
import { maxSessionEventBytes, SessionEventStore } from './event-store.js';

/**
 * Most sessions one run may hold open at once, of both kinds: each keeps up to {@link maxSessionEventBytes} of events to
 * replay and an MCP server of its own until it closes or idles out, so a run's token cannot hold more than 16 × 4 MiB.
 * An agent reconnecting normally holds one or two; a client that restarts often closes its old ones (DELETE /mcp).
 */
export const maxSessionsPerRun = 16;

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

/**
 * The open MCP sessions of an HTTP server, Streamable HTTP and HTTP+SSE alike: each is bound
 * to the run whose token opened it and has an MCP server of its own on that run.
 */
export class SessionTable {
  private readonly sessions = new Map<string, StreamableSession | SseSession>();

  /** @param recordFor the record a session's calls go to: the run's, plus the server's metrics. */
  constructor(
    private readonly engine: Engine,
    private readonly recordFor: (run: Run) => RecordSessionEvent,
  ) {}

  get size(): number {
    return this.sessions.size;
  }

  callsInFlight(): number {
    return [...this.sessions.values()].reduce((n, s) => n + s.recording.callsInFlight, 0);
  }

  /** `/mcp`: a new session on an initialize request without a session id, else the session's own transport. */
  async handleStreamable(req: IncomingMessage, res: ServerResponse, runId: string, body: unknown): Promise<void> {
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId !== 'string') {
      if (req.method !== 'POST') throw new A2rlError('INVALID_INPUT', `${req.method} /mcp needs the Mcp-Session-Id header of a session.`);
      return this.startStreamable(req, res, runId, body);
    }
    const session = this.sessionFor(sessionId, runId);
    if (session.kind !== 'streamable') {
      throw new A2rlError(
        'INVALID_INPUT',
        `Session ${sessionId} is an HTTP+SSE session: post its messages to /messages?sessionId=${sessionId}, or start a Streamable HTTP session at /mcp.`,
      );
    }
    await session.transport.handleRequest(req, res, body);
  }

  /** `GET /sse`: a new HTTP+SSE session, its stream open until the client goes. */
  async startSse(res: ServerResponse, runId: string): Promise<void> {
    this.refuseBeyondCap(runId);
    const run = await this.engine.remoteRun(runId);
    const transport = new SSEServerTransport('/messages', res);
    const recording = new RecordingTransport(transport, this.recordFor(run));
    this.sessions.set(transport.sessionId, { kind: 'sse', runId, transport, recording, lastRequestAt: Date.now() });
    recording.onclose = () => this.sessions.delete(transport.sessionId);
    await createServer(run).connect(recording);
  }

  /** `POST /messages?sessionId=`: one message of an HTTP+SSE session. */
  async handleSseMessage(req: IncomingMessage, res: ServerResponse, runId: string, sessionId: string | null, body: unknown): Promise<void> {
    if (!sessionId) throw new A2rlError('INVALID_INPUT', 'POST /messages needs ?sessionId= from the endpoint event of GET /sse.');
    const session = this.sessionFor(sessionId, runId);
    if (session.kind !== 'sse') {
      throw new A2rlError(
        'INVALID_INPUT',
        `Session ${sessionId} is a Streamable HTTP session: send its messages to /mcp with the Mcp-Session-Id header.`,
      );
    }
    await session.transport.handlePostMessage(req, res, body);
  }

  /** Closes the sessions of revoked runs, and Streamable HTTP sessions idle since `idleSince` with no call in flight. */
  closeIdleAndRevoked(idleSince: number): void {
    for (const [id, session] of this.sessions) {
      const revoked = this.engine.store.getRunToken(session.runId)?.revoked_at != null;
      const idle = session.kind === 'streamable' && session.lastRequestAt <= idleSince && session.recording.callsInFlight === 0;
      if (!revoked && !idle) continue;
      this.engine.logger.info({ session: id, run: session.runId, revoked }, 'closing a session');
      void session.recording.close();
    }
  }

  async closeAll(): Promise<void> {
    for (const session of [...this.sessions.values()]) await session.recording.close();
  }

  private async startStreamable(req: IncomingMessage, res: ServerResponse, runId: string, body: unknown): Promise<void> {
    if (!isInitializeRequest(body)) {
      throw new A2rlError('INVALID_INPUT', 'No Mcp-Session-Id header: a new session starts with an initialize request.');
    }
    this.refuseBeyondCap(runId);
    const run = await this.engine.remoteRun(runId);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      // Resumable: a client whose stream dropped reconnects with Last-Event-ID and gets the answers it missed.
      eventStore: new SessionEventStore(),
      onsessioninitialized: (id) =>
        void this.sessions.set(id, { kind: 'streamable', runId, transport, recording, lastRequestAt: Date.now() }),
    });
    const recording = new RecordingTransport(transport, this.recordFor(run));
    recording.onclose = () => {
      if (transport.sessionId !== undefined) this.sessions.delete(transport.sessionId);
    };
    await createServer(run).connect(recording);
    await transport.handleRequest(req, res, body);
  }

  private refuseBeyondCap(runId: string): void {
    let open = 0;
    for (const session of this.sessions.values()) if (session.runId === runId) open++;
    if (open >= maxSessionsPerRun) {
      throw new A2rlError(
        'CONFLICT',
        `This run has ${open} MCP sessions open, the most it may hold: reuse one (its Mcp-Session-Id), close one you no longer use (DELETE /mcp with its Mcp-Session-Id), or wait until an idle one is closed.`,
      );
    }
  }

  private sessionFor(id: string, runId: string): StreamableSession | SseSession {
    const session = this.sessions.get(id);
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
}
