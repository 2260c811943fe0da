import type Database from 'better-sqlite3';
import type { ServerResponse } from 'node:http';
import type { EventRow } from '../store/store.js';
import { A2rlError } from '../util/errors.js';

/**
 * Server-Sent Events for the view's open pages. One feed per server reads the store incrementally by event id
 * (a primary-key range, at most `maxEventsPerTick` rows a tick, and only while a page is open) and hands each
 * page's stream the new events; a stream turns them into small pushes of server-rendered HTML. Nothing polls per
 * page, and no push reads more than its bounds (see each stream).
 *
 * One connection carries the streams of every tab of a browser (issue 51: a browser opens at most 6 HTTP/1.1
 * connections to a host, so a connection per tab hangs the 7th): each stream is a channel, named by its tab, and
 * each message is `{ch, event, id?, data}` on the connection's one event type (src/view/client/view.js shares it).
 */

/** How often the feed looks for new events: a tool call shows on its run's page within about this long. */
const tickMs = 250;
/** Most events one tick reads; more wait for the next tick. */
const maxEventsPerTick = 1000;
/** Open pages (channels) at most: more are refused, so a forgotten tab storm cannot load the server. */
const maxStreams = 100;
/** Channels one connection carries at most: each costs its push a tick and its part of the URL. */
export const maxChannels = 30;
/** A comment every so often keeps proxies and the browser from closing a quiet stream. */
const heartbeatMs = 20_000;
/** A client this far behind in reading is dropped (its page reconnects and catches up) rather than buffered without end. */
const maxBufferedBytes = 1 << 20;

export interface FeedBatch {
  events: readonly EventRow[];
  /** Runs created since the last tick. */
  newRuns: readonly string[];
}

/** What one open page does with the feed's batches. */
export interface LiveStream {
  /** The id of the last event this page has seen. */
  after: number;
  /** Pushes what the batch changes on the page (events already filtered to those after `after`); called every tick. */
  push(batch: FeedBatch, send: SendEvent): Promise<void>;
  /** The run whose events it needs, for its catch-up read; undefined: any run's. */
  runId?: string;
}

export type SendEvent = (event: string, data: unknown, id?: number) => void;

interface Open {
  /** Each tab's stream by the tab's channel name; a channel whose push failed leaves it. */
  channels: Map<string, LiveStream>;
  res: ServerResponse;
}

const message = (ch: string, event: string, data: unknown, id?: number) => `data: ${JSON.stringify({ ch, event, id, data })}\n\n`;

export class LiveFeed {
  private readonly open = new Set<Open>();
  private cursor: number;
  private runCursor: number;
  private timer?: NodeJS.Timeout;
  private heartbeat?: NodeJS.Timeout;
  private ticking = false;

  constructor(private readonly db: Database.Database) {
    this.cursor = (db.prepare('SELECT COALESCE(MAX(id), 0) AS id FROM events').get() as { id: number }).id;
    this.runCursor = (db.prepare('SELECT COALESCE(MAX(rowid), 0) AS id FROM runs').get() as { id: number }).id;
  }

  /** Starts the tabs' streams on `res`, one channel each; they end when the connection does. */
  async start(res: ServerResponse, channels: Map<string, LiveStream>): Promise<void> {
    const pages = [...this.open].reduce((sum, { channels: open }) => sum + open.size, 0);
    if (pages + channels.size > maxStreams) {
      throw new A2rlError('UNAVAILABLE', `${maxStreams} view pages are open already; close some and reload this one.`);
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
    res.write('retry: 2000\n\n');
    const entry: Open = { channels, res };
    res.on('close', () => {
      this.open.delete(entry);
      if (this.open.size === 0) this.stop();
    });
    // Events between each page's render (or its last connection) and this one: read for that page alone, bounded like a tick.
    for (const [ch, stream] of channels) {
      if (stream.after >= this.cursor) continue;
      const missed = (
        stream.runId === undefined
          ? this.db
              .prepare('SELECT * FROM events WHERE id > ? AND id <= ? ORDER BY id LIMIT ?')
              .all(stream.after, this.cursor, maxEventsPerTick)
          : this.db
              .prepare('SELECT * FROM events WHERE run_id = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?')
              .all(stream.runId, stream.after, this.cursor, maxEventsPerTick)
      ) as EventRow[];
      await this.deliver(entry, { events: missed, newRuns: [] }, [[ch, stream]]);
    }
    // The browser may have gone during the catch-up: its close already ran, so it must not be added after it.
    if (res.destroyed || res.writableEnded) return;
    this.open.add(entry);
    this.timer ??= setInterval(() => void this.tick(), tickMs).unref();
    this.heartbeat ??= setInterval(() => this.open.forEach(({ res: r }) => r.write(': ping\n\n')), heartbeatMs).unref();
  }

  /** Ends every stream (the server is stopping). */
  close(): void {
    for (const { res } of this.open) res.end();
    this.open.clear();
    this.stop();
  }

  private stop(): void {
    clearInterval(this.timer);
    clearInterval(this.heartbeat);
    this.timer = this.heartbeat = undefined;
  }

  private async tick(): Promise<void> {
    // A slow push (a log read) delays the next tick rather than piling ticks up.
    if (this.ticking) return;
    this.ticking = true;
    try {
      const events = this.db
        .prepare('SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?')
        .all(this.cursor, maxEventsPerTick) as EventRow[];
      if (events.length > 0) this.cursor = events.at(-1)!.id;
      const runs = this.db.prepare('SELECT rowid AS rowid, id FROM runs WHERE rowid > ? ORDER BY rowid').all(this.runCursor) as Array<{
        rowid: number;
        id: string;
      }>;
      if (runs.length > 0) this.runCursor = runs.at(-1)!.rowid;
      const batch = { events, newRuns: runs.map((r) => r.id) };
      await Promise.all([...this.open].map((entry) => this.deliver(entry, batch)));
    } finally {
      this.ticking = false;
    }
  }

  private async deliver(entry: Open, batch: FeedBatch, channels: Iterable<[string, LiveStream]> = entry.channels): Promise<void> {
    // A push's messages leave in one write: one syscall a tick for each browser, however many tabs and events.
    const messages: string[] = [];
    for (const [ch, stream] of channels) {
      const events = batch.events.filter((e) => e.id > stream.after && (stream.runId === undefined || e.run_id === stream.runId));
      if (events.length > 0) stream.after = events.at(-1)!.id;
      try {
        await stream.push({ events, newRuns: batch.newRuns }, (event, data, id) => void messages.push(message(ch, event, data, id)));
      } catch (error) {
        // Only that tab's stream ends (its tab says so); the connection goes on for the others.
        messages.push(message(ch, 'failed', { message: `The live view stopped: ${(error as Error).message}. Reload the page.` }));
        entry.channels.delete(ch);
      }
    }
    if (entry.channels.size === 0) return void entry.res.end(messages.join(''));
    if (messages.length === 0) return;
    entry.res.write(messages.join(''));
    if (entry.res.writableLength > maxBufferedBytes) entry.res.destroy();
  }
}
