import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Engine } from '../../core/engine.js';
import { RecordingTransport } from '../recording-transport.js';
import type { Run } from '../../core/run.js';
import { maxMessageBytes } from '../message-limit.js';
import { createServer } from '../server.js';

/**
 * Serves one run over stdin/stdout until the client goes away (stdin ends) or the
 * process is told to stop; then the run ends and grading in flight finishes.
 */
export async function serveStdio(engine: Engine, run: Run): Promise<void> {
  const server = createServer(run);
  const stdio = new StdioTransport(process.stdin, process.stdout, (refused) =>
    run.record('tool', refused.tool ?? 'unknown', { arguments: {}, error: refused.error, bytes: refused.bytes, duration_ms: 0 }),
  );
  const transport = new RecordingTransport(stdio, run.record);
  const closed = new Promise<string>((resolve) => {
    server.server.onclose = () => resolve('the client disconnected');
    process.stdin.once('end', () => void transport.close());
    // SIGHUP too: a terminal closing under a hand-started server ends its run as orderly as a client leaving.
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => resolve(`the server received ${signal}`));
  });
  await server.connect(transport);
  engine.logger.info({ run: run.id, task: run.task.id }, 'serving MCP over stdio');
  const reason = await closed;
  engine.logger.info({ run: run.id, reason }, 'session over; finishing');
  // Finishing waits for the baseline's grading and the contamination check (within the engine's grace). A client that
  // ends this process meanwhile (the MCP SDK's sends TERM 2 s after closing stdin, KILL 2 s later) does not end the
  // check: it runs in a session of its own and records its verdict (src/integrity/background.ts).
  await run.end(reason);
  await engine.close();
}

/** A message refused for its size: what could be read of it, and the error it was answered with. */
export interface OversizedMessage {
  bytes: number;
  tool: string | undefined;
  error: string;
}

/** Kept of a line past the limit: its start (method, tool) and its end (the SDK writes the request id last). */
const keptEdgeBytes = 4096;

/**
 * MCP over stdin/stdout, one JSON-RPC message per line, like the SDK's stdio transport but
 * bounded: a line longer than {@link maxMessageBytes} is skipped as it streams in (never
 * buffered) and answered with a JSON-RPC error for its request, so the session goes on.
 */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Set while skipping a line past the limit. */
  private skipping: { bytes: number; head: Buffer; tail: Buffer } | undefined;
  private readonly ondata = (chunk: Buffer) => this.receive(chunk);
  private readonly onstreamerror = (error: Error) => this.onerror?.(error);

  constructor(
    private readonly stdin: NodeJS.ReadableStream,
    private readonly stdout: NodeJS.WritableStream,
    private readonly onOversized: (refused: OversizedMessage) => void = () => undefined,
  ) {}

  async start(): Promise<void> {
    this.stdin.on('data', this.ondata);
    this.stdin.on('error', this.onstreamerror);
  }

  async close(): Promise<void> {
    this.stdin.off('data', this.ondata);
    this.stdin.off('error', this.onstreamerror);
    if (this.stdin.listenerCount('data') === 0) this.stdin.pause();
    this.pending = [];
    this.onclose?.();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.stdout.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.stdout.once('drain', resolve);
    });
  }

  private receive(chunk: Buffer): void {
    for (let newline = chunk.indexOf(10); ; newline = chunk.indexOf(10)) {
      const piece = newline === -1 ? chunk : chunk.subarray(0, newline);
      if (this.skipping) {
        this.skipping.bytes += piece.length;
        this.skipping.tail = Buffer.concat([this.skipping.tail, piece]).subarray(-keptEdgeBytes);
      } else if (this.pendingBytes + piece.length > maxMessageBytes) {
        const line = Buffer.concat([...this.pending, piece]);
        this.skipping = { bytes: line.length, head: line.subarray(0, keptEdgeBytes), tail: line.subarray(-keptEdgeBytes) };
        this.pending = [];
        this.pendingBytes = 0;
      } else {
        this.pending.push(piece);
        this.pendingBytes += piece.length;
      }
      if (newline === -1) return;
      chunk = chunk.subarray(newline + 1);
      this.endLine();
    }
  }

  private endLine(): void {
    if (this.skipping) {
      const skipped = this.skipping;
      this.skipping = undefined;
      void this.refuse(skipped);
      return;
    }
    const line = Buffer.concat(this.pending).toString('utf8').replace(/\r$/, '');
    this.pending = [];
    this.pendingBytes = 0;
    if (line.trim() === '') return;
    try {
      this.onmessage?.(JSONRPCMessageSchema.parse(JSON.parse(line)));
    } catch (error) {
      this.onerror?.(error as Error);
    }
  }

  /** Answers a message too large to read: a JSON-RPC error for its request where its id can be found, else a logged notice. */
  private async refuse(skipped: { bytes: number; head: Buffer; tail: Buffer }): Promise<void> {
    const head = skipped.head.toString('utf8');
    const tail = skipped.tail.toString('utf8');
    const idText =
      /^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/.exec(head)?.[1] ??
      /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/.exec(tail)?.[1];
    const tool = /"method"\s*:\s*"tools\/call"\s*,\s*"params"\s*:\s*\{\s*"name"\s*:\s*"([\w-]+)"/.exec(head)?.[1];
    const error =
      `[TOO_LARGE] This message is ${skipped.bytes} bytes; a message may be at most ${maxMessageBytes} bytes (${maxMessageBytes / 2 ** 20} MiB) ` +
      'on every transport. Nothing was done. Send large content in parts (write_file with append=true), or generate it with a script via exec.';
    this.onOversized({ bytes: skipped.bytes, tool, error });
    if (idText !== undefined) {
      await this.send({ jsonrpc: '2.0', id: JSON.parse(idText) as string | number, error: { code: -32600, message: error } });
    } else {
      await this.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'error', logger: 'a2rl', data: error } });
    }
  }
}
