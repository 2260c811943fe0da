import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import type { Mount } from '../../sandbox/contract.js';
import type { RecordEvent } from '../store/events.js';
import { A2rlError, type ErrorCode, isA2rlError } from '../util/errors.js';
import type { SearchCache } from './cache.js';
import { type SearchProvider, SearchProviderError, type SearchResult } from './provider.js';

/** Where a run's sandbox finds the channel: a folder holding the socket, bound read-only (connecting needs no write). */
export const sandboxSearchDir = '/run/a2rl/search';
export const socketName = 'search.sock';
/** The variable the sandbox's client reads the socket's path from. */
export const socketEnv = 'A2RL_SEARCH_SOCKET';

/** Most results one query may ask for; the reference asks for 3. */
export const maxTopK = 10;
export const defaultTopK = 3;
export const maxQueryChars = 1000;
/** Most bytes of one request: a query and its options, nothing more. */
const maxRequestBytes = 8 * 1024;
/** Searches of one run waiting on the provider at once; more are refused as BUSY (nothing counted). */
export const maxSearchesInFlight = 4;
/** How long the provider may take, as the reference's 10 s request timeout. */
const providerTimeoutMs = 10_000;
/** Connections one run's sandbox may hold open on its socket at once; more are dropped by the server. */
const maxConnections = 32;
/** A Unix socket's path must fit `sun_path` (108 bytes with its NUL). */
const maxSocketPathBytes = 107;

const requestSchema = z
  .object({
    query: z.string().max(maxQueryChars),
    top_k: z.number().int().min(1).max(maxTopK).default(defaultTopK),
  })
  .strict();

const statusOf: Partial<Record<ErrorCode, number>> = {
  INVALID_INPUT: 400,
  NOT_FOUND: 404,
  TOO_LARGE: 413,
  BUDGET_EXHAUSTED: 429,
  BUSY: 429,
  RUN_ENDED: 410,
  UNAVAILABLE: 502,
};

/** What the channel asks of its run before it counts a query: why none may be made now (the run ended, its wall clock is spent). */
export interface SearchAdmission {
  searchRefusal(): A2rlError | undefined;
}

/**
 * Whose searches a channel answers, which decides the events they are recorded as. A run's (`query`, `failed`) are the
 * agent's spending, counted against its budget (and recounted from its events by a server that adopts the run); a
 * grading's (`grading_query`, `grading_failed`, recorded in the graded run's events) are the server's own, counted
 * against nothing.
 */
export type SearchPurpose = 'run' | 'grading';
const eventNames: Record<SearchPurpose, { query: string; failed: string }> = {
  run: { query: 'query', failed: 'failed' },
  grading: { query: 'grading_query', failed: 'grading_failed' },
};

/**
 * One run's search channel: HTTP over a Unix socket in the run's folder, bound into its sandbox, which has no network
 * otherwise. `POST /search` with `{"query", "top_k"}` answers `{"results": [{title, snippet, url}], "cached",
 * "searches_left"}`; an error answers `{"error": "[CODE] what to do"}`. Each query is counted against the run's
 * search budget and recorded (`search/query`) before its answer leaves; a provider failure is recorded
 * (`search/failed`) and not counted. The provider and its key stay in this process.
 */
export class SearchChannel {
  private inFlight = 0;
  private admission: SearchAdmission | undefined;

  private constructor(
    private readonly server: Server,
    readonly socketPath: string,
    private readonly provider: SearchProvider,
    private readonly cache: SearchCache,
    /** Whose answers the cache gives this channel: the run's own (its id), or the gradings'. */
    private readonly cacheScope: string,
    readonly limit: number,
    /** Queries counted so far: those recorded before this server served the run, then this one's. */
    private counted: number,
    private readonly record: RecordEvent,
    private readonly events: { query: string; failed: string },
  ) {}

  /**
   * Listens on `<runDir>/search/search.sock` (a grading's: its own folder beside the grading's output), replacing a
   * socket a stopped server left there.
   */
  static async open(options: {
    runDir: string;
    provider: SearchProvider;
    cache: SearchCache;
    cacheScope: string;
    limit: number;
    counted: number;
    record: RecordEvent;
    purpose?: SearchPurpose;
  }): Promise<SearchChannel> {
    const dir = join(options.runDir, 'search');
    const socketPath = join(dir, socketName);
    if (Buffer.byteLength(socketPath) > maxSocketPathBytes) {
      throw new A2rlError(
        'INVALID_INPUT',
        `The search socket's path ${socketPath} is longer than a Unix socket's ${maxSocketPathBytes} bytes; give the server a shorter --home.`,
      );
    }
    // The run's folder is the server's (the agent writes only its workspace), so the socket's name is the server's too.
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    chmodSync(dir, 0o755);
    rmSync(socketPath, { force: true });
    const server = createServer({ requestTimeout: providerTimeoutMs + 5000, headersTimeout: 5000 });
    server.maxConnections = maxConnections;
    const channel = new SearchChannel(
      server,
      socketPath,
      options.provider,
      options.cache,
      options.cacheScope,
      options.limit,
      options.counted,
      options.record,
      eventNames[options.purpose ?? 'run'],
    );
    server.on('request', (request, response) => void channel.answer(request, response));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // The sandbox's user is not the server's on every backend (Docker runs jobs as uid 1000): it must be able to connect.
    chmodSync(socketPath, 0o666);
    return channel;
  }

  /** Queries counted against the run's budget. */
  get used(): number {
    return this.counted;
  }

  /** The mount that shows the socket's folder in the run's sandbox, and the variable that names the socket there. */
  sandboxMount(): { mount: Mount; env: Record<string, string> } {
    return {
      mount: { source: dirname(this.socketPath), target: sandboxSearchDir, readOnly: true },
      env: { [socketEnv]: `${sandboxSearchDir}/${socketName}` },
    };
  }

  /** Queries are answered once the run says whether they may be made; until then they are refused. */
  admitThrough(admission: SearchAdmission): void {
    this.admission = admission;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    rmSync(this.socketPath, { force: true });
  }

  private async answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      if (request.method !== 'POST' || request.url !== '/search') {
        request.resume();
        throw new A2rlError('NOT_FOUND', 'The search channel answers only POST /search with {"query": "...", "top_k": 3}.');
      }
      const { query, topK } = parseRequest(await readBody(request));
      this.send(response, 200, await this.search(query, topK));
    } catch (error) {
      const known = isA2rlError(error) ? error : new A2rlError('INTERNAL', 'The search failed inside the server; nothing was counted.');
      this.send(response, statusOf[known.code] ?? 500, { error: `[${known.code}] ${known.message}` });
    }
  }

  private async search(query: string, topK: number): Promise<{ results: SearchResult[]; cached: boolean; searches_left: number | null }> {
    // Checked and counted in one synchronous step, so racing queries cannot all pass the last one left.
    const refusal = this.admission ? this.admission.searchRefusal() : new A2rlError('UNAVAILABLE', 'The run is not served yet; try again.');
    if (refusal) throw refusal;
    if (this.counted >= this.limit) {
      throw new A2rlError(
        'BUDGET_EXHAUSTED',
        `All ${this.limit} search queries of this run's budget are used; no more can be made. Answer from what you found, or train without search.`,
      );
    }
    const started = Date.now();
    const cached = this.cache.get(this.provider.cacheId, this.cacheScope, query, topK);
    // Only a query that must wait on the provider is refused as busy: a cached answer waits on nothing.
    if (!cached && this.inFlight >= maxSearchesInFlight) {
      throw new A2rlError(
        'BUSY',
        `${this.inFlight} searches of this run are already waiting for the provider (at most ${maxSearchesInFlight}); nothing was counted. Wait for them, then ask again.`,
      );
    }
    // A grading's channel has no limit: JSON has no Infinity, so it says null.
    const left = () => (Number.isFinite(this.limit) ? Math.max(0, this.limit - this.counted) : null);
    this.counted += 1;
    if (cached) {
      this.record('search', this.events.query, {
        query,
        top_k: topK,
        provider: this.provider.name,
        cached: true,
        results: cached.length,
        ms: Date.now() - started,
      });
      return { results: cached, cached: true, searches_left: left() };
    }
    this.inFlight += 1;
    let results: SearchResult[];
    try {
      results = await this.provider.search(query, topK, AbortSignal.timeout(providerTimeoutMs));
    } catch (error) {
      this.counted -= 1;
      const reason = error instanceof SearchProviderError ? error.message : `${this.provider.name} failed`;
      this.record('search', this.events.failed, { query, top_k: topK, provider: this.provider.name, reason, ms: Date.now() - started });
      throw new A2rlError('UNAVAILABLE', `The search provider failed (${reason}); nothing was counted. Try again later.`);
    } finally {
      this.inFlight -= 1;
    }
    this.cache.put(this.provider.cacheId, this.cacheScope, query, topK, results);
    this.record('search', this.events.query, {
      query,
      top_k: topK,
      provider: this.provider.name,
      cached: false,
      results: results.length,
      ms: Date.now() - started,
    });
    return { results, cached: false, searches_left: left() };
  }

  private send(response: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    response.end(text);
  }
}

/** The request's body, refused past {@link maxRequestBytes}; the rest is drained so that the refusal can still be answered. */
function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    request.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes <= maxRequestBytes) chunks.push(chunk);
    });
    request.once('error', reject);
    request.once('end', () => {
      if (bytes > maxRequestBytes) {
        reject(new A2rlError('TOO_LARGE', `A search request is at most ${maxRequestBytes} bytes; send only {"query": "...", "top_k": 3}.`));
      } else resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

/** The request's query, its spaces collapsed (so the cache sees one query however it was spaced), and how many results. */
function parseRequest(body: string): { query: string; topK: number } {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    throw new A2rlError('INVALID_INPUT', 'The search request is not JSON; send {"query": "...", "top_k": 3}.');
  }
  const parsed = requestSchema.safeParse(json);
  if (!parsed.success) {
    throw new A2rlError(
      'INVALID_INPUT',
      `The search request must be {"query": a string of at most ${maxQueryChars} characters, "top_k": a whole number from 1 to ${maxTopK} (default ${defaultTopK})}: ${parsed.error.issues.map((issue) => `${issue.path.join('.') || 'request'}: ${issue.message}`).join('; ')}.`,
    );
  }
  const query = parsed.data.query.trim().replace(/\s+/g, ' ');
  if (query === '') throw new A2rlError('INVALID_INPUT', 'The search query is empty; ask for something.');
  return { query, topK: parsed.data.top_k };
}
