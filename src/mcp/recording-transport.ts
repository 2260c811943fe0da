import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { cannotRecord } from '../store/disk-full.js';

const maxRecordedText = 4000;

/** Long strings (file contents, logs) are cut in the record; their length is kept. */
function abridge(value: unknown): unknown {
  // Most results hold no long string: they are recorded as they are, with no copy.
  if (!holdsLongString(value)) return value;
  if (typeof value === 'string') {
    return value.length > maxRecordedText ? `${value.slice(0, maxRecordedText)}… [${value.length} chars]` : value;
  }
  if (Array.isArray(value)) return value.map(abridge);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, abridge(v)]));
  }
  return value;
}

function holdsLongString(value: unknown): boolean {
  if (typeof value === 'string') return value.length > maxRecordedText;
  if (value === null || typeof value !== 'object') return false;
  for (const item of Array.isArray(value) ? value : Object.values(value)) if (holdsLongString(item)) return true;
  return false;
}

/**
 * Records an event of the session; a promise resolves once it is committed (a group commit,
 * `GroupCommit`), and a response waits for it.
 */
export type RecordSessionEvent = (kind: string, name: string, data: unknown) => void | Promise<void>;

interface PendingCall {
  tool: string;
  arguments: unknown;
  startedAt: number;
}

/**
 * Wraps a server transport and records every tool call (arguments, result summary,
 * error, duration) as the response leaves, before the client can see it. Sitting on the
 * transport, it records calls that fail validation too, whatever the tool.
 */
export class RecordingTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  private readonly pending = new Map<string | number, PendingCall>();
  /** `tools/list` requests not yet answered: the answer shows the agent had the tools (the launcher checks it). */
  private readonly listings = new Set<string | number>();

  constructor(
    private readonly inner: Transport,
    private readonly record: RecordSessionEvent,
  ) {
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
    inner.onmessage = (message, extra) => {
      this.observeIncoming(message);
      this.onmessage?.(message, extra);
    };
  }

  /** Tool calls received and not yet answered. */
  get callsInFlight(): number {
    return this.pending.size;
  }

  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    try {
      const recorded = this.observeOutgoing(message);
      if (recorded) await recorded;
    } catch (error) {
      // Never no answer (the client would wait for ever): an answer that cannot be recorded leaves as an error.
      this.onerror?.(error as Error);
      return this.inner.send(unrecordedAnswer(message, error), options);
    }
    return this.inner.send(message, options);
  }

  private observeIncoming(message: JSONRPCMessage): void {
    if ('method' in message && message.method === 'notifications/cancelled') {
      // A cancelled call gets no response: record it now.
      const { requestId, reason } = (message.params ?? {}) as { requestId?: string | number; reason?: string };
      const call = requestId === undefined ? undefined : this.pending.get(requestId);
      if (call) {
        this.pending.delete(requestId!);
        this.unanswered(() =>
          this.record('tool', call.tool, {
            arguments: call.arguments,
            error: `cancelled by the client${reason ? `: ${reason}` : ''}`,
            duration_ms: Date.now() - call.startedAt,
          }),
        );
      }
      return;
    }
    if (!('method' in message) || !('id' in message)) return;
    if (message.method === 'tools/call') {
      const params = (message.params ?? {}) as { name?: string; arguments?: unknown };
      this.pending.set(message.id, { tool: String(params.name), arguments: params.arguments ?? {}, startedAt: Date.now() });
    } else if (message.method === 'tools/list') {
      this.listings.add(message.id);
    } else if (message.method === 'initialize') {
      const params = (message.params ?? {}) as { clientInfo?: unknown; protocolVersion?: string };
      this.unanswered(() => this.record('session', 'initialize', { client: params.clientInfo, protocol_version: params.protocolVersion }));
    }
  }

  /** An event no response waits for: a failed commit is reported as a transport error. */
  private unanswered(record: () => void | Promise<void>): void {
    try {
      record()?.catch((error: Error) => this.onerror?.(error));
    } catch (error) {
      this.onerror?.(error as Error);
    }
  }

  /** Records the tool call a response answers; what `record` returned, to wait for before the response leaves. */
  private observeOutgoing(message: JSONRPCMessage): void | Promise<void> {
    if (!('id' in message) || 'method' in message || message.id === undefined) return;
    if (this.listings.delete(message.id) && 'result' in message) {
      const { tools } = message.result as { tools?: Array<{ name: string }> };
      this.unanswered(() => this.record('session', 'tools_listed', { tools: (tools ?? []).map((tool) => tool.name) }));
      return;
    }
    const call = this.pending.get(message.id);
    if (!call) return;
    this.pending.delete(message.id);
    const durationMs = Date.now() - call.startedAt;
    if ('error' in message) {
      return this.record('tool', call.tool, { arguments: call.arguments, error: message.error.message, duration_ms: durationMs });
    }
    const result = message.result as { isError?: boolean; content?: Array<{ type: string; text?: string }>; structuredContent?: unknown };
    const text = result.content?.find((c) => c.type === 'text')?.text ?? '';
    return this.record('tool', call.tool, {
      arguments: call.arguments,
      ...(result.isError ? { error: abridge(text) } : { result: abridge(result.structuredContent ?? text) }),
      duration_ms: durationMs,
    });
  }
}

/**
 * What leaves in place of an answer the store could not record: an error answer as it is (it reports that nothing or
 * part was done, which stays true), a result as `UNAVAILABLE` (a result not on record must not reach the client).
 */
function unrecordedAnswer(message: JSONRPCMessage, cause: unknown): JSONRPCMessage {
  if (!('result' in message) || (message.result as { isError?: boolean }).isError) return message;
  const text = `[UNAVAILABLE] ${cannotRecord('It may have been done (look with the read tools: list_files, job_status); try again later.', cause).message}`;
  return { jsonrpc: message.jsonrpc, id: message.id, result: { isError: true, content: [{ type: 'text', text }] } };
}
