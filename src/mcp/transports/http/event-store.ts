import type { EventId, EventStore, StreamId } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Most events one session keeps for replay; the oldest go first. */
export const maxSessionEvents = 256;
/** Most bytes of events one session keeps for replay (the newest event is kept whatever its size). */
export const maxSessionEventBytes = 4 * 2 ** 20;

interface StoredEvent {
  streamId: StreamId;
  seq: number;
  message: JSONRPCMessage;
  bytes: number;
}

/**
 * What one Streamable HTTP session sent, kept so that a client whose stream dropped gets the answers it missed when
 * it reconnects with `Last-Event-ID` (the SDK writes every SSE event through it and replays from it). Bounded by count
 * and bytes: a client away for longer than the last {@link maxSessionEvents} events loses the older ones.
 */
export class SessionEventStore implements EventStore {
  private readonly events: StoredEvent[] = [];
  private bytes = 0;
  private nextSeq = 1;

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const event = { streamId, seq: this.nextSeq++, message, bytes: Buffer.byteLength(JSON.stringify(message)) };
    this.events.push(event);
    this.bytes += event.bytes;
    while (this.events.length > 1 && (this.events.length > maxSessionEvents || this.bytes > maxSessionEventBytes)) {
      this.bytes -= this.events.shift()!.bytes;
    }
    return eventIdOf(event);
  }

  /** The stream an event id names: the id carries it, so a stream resumes even once its older events were dropped. */
  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return parseEventId(eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const last = parseEventId(lastEventId);
    if (!last) return '';
    for (const event of this.events.filter((e) => e.streamId === last.streamId && e.seq > last.seq)) {
      // The priming event (no message) only gave the client its first id: nothing to replay.
      if (Object.keys(event.message).length > 0) await send(eventIdOf(event), event.message);
    }
    return last.streamId;
  }
}

const eventIdOf = (event: StoredEvent): EventId => `${event.streamId}_${event.seq}`;

function parseEventId(eventId: EventId): { streamId: StreamId; seq: number } | undefined {
  const match = /^(.+)_(\d+)$/.exec(eventId);
  return match ? { streamId: match[1]!, seq: Number(match[2]) } : undefined;
}
