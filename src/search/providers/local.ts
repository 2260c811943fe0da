import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { A2rlError } from '../../util/errors.js';
import { sha256 } from '../../util/hashing.js';
import { packageRoot } from '../../util/paths.js';
import { type SearchProvider, SearchProviderError, type SearchResult, type SearchSettings } from '../provider.js';
import { parseCorpus } from './bm25.js';
import type { LocalSearchAnswer, LocalSearchRequest } from './local-worker.js';

/** The worker's compiled entry: the same file whether the server runs from dist or its sources (tests build dist first). */
const workerEntry = join(packageRoot, 'dist', 'src', 'search', 'providers', 'local-worker.js');

/**
 * A BM25 index over a corpus on disk (JSONL, one `{"title", "text", "url"}` per line), for hosts with no search API
 * or runs that must not depend on one. The corpus is checked here, before the server starts; the index lives and
 * ranks in a worker thread, so a run's queries never hold the server's event loop (invariant 9). Queries are ranked
 * in the order they come, each run's at most 4 at once (the channel's bound), at most {@link maxWaiting} of all runs.
 */
export function localProvider(settings: SearchSettings): SearchProvider {
  const corpus = settings.corpus;
  if (!corpus) {
    throw new A2rlError(
      'INVALID_INPUT',
      '--search local needs --search-corpus FILE: a JSONL file with one {"title", "text", "url"} per line.',
    );
  }
  let raw: string;
  try {
    raw = readFileSync(corpus, 'utf8');
  } catch (error) {
    throw new A2rlError(
      'NOT_FOUND',
      `Cannot read the search corpus ${corpus} (${(error as Error).message}); give an existing JSONL file to --search-corpus.`,
    );
  }
  parseCorpus(raw, corpus);
  const hash = sha256(raw);
  const ranker = new LocalRanker(corpus, hash);
  return {
    name: 'local',
    cacheId: `local@${hash}`,
    search: (query, topK, signal) => ranker.rank(query, topK, signal),
    close: () => ranker.close(),
  };
}

/**
 * Queries of all runs the worker may hold at once (8 runs' 4 each); more are refused at once, counted nothing. A
 * deeper queue would only hold queries past the provider's 10 s timeout on a busy host.
 */
export const maxWaiting = 32;

/** The worker and the queries waiting on it; a worker that dies is started again for the next query. */
class LocalRanker {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve: (results: SearchResult[]) => void; reject: (error: Error) => void }>();
  /** Why no query can be answered any more (the corpus changed on disk), once the worker said so. */
  private broken: string | undefined;

  constructor(
    private readonly corpus: string,
    private readonly hash: string,
  ) {
    // Indexed from the start, so that the first query does not wait for it.
    this.start();
  }

  rank(query: string, topK: number, signal: AbortSignal): Promise<SearchResult[]> {
    if (this.broken) return Promise.reject(new SearchProviderError(this.broken));
    if (this.waiting.size >= maxWaiting) {
      return Promise.reject(new SearchProviderError(`local search is busy: ${maxWaiting} queries wait on it already`));
    }
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise<SearchResult[]>((resolve, reject) => {
      const onAbort = () => {
        this.settle(id, new SearchProviderError('local did not answer in time'));
        // Not ranked when its turn comes: a timed-out query must not delay those still waited for.
        this.worker?.postMessage({ abandoned: id } satisfies LocalSearchRequest);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(id, {
        resolve: (results) => {
          signal.removeEventListener('abort', onAbort);
          resolve(results);
        },
        reject: (error) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
      // The worker keeps the process alive only while a query waits on it.
      if (this.waiting.size === 1) worker.ref();
      worker.postMessage({ id, query, topK } satisfies LocalSearchRequest);
    });
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll(new SearchProviderError('local search stopped with the server'));
    await worker?.terminate();
  }

  private start(): Worker {
    const worker = new Worker(workerEntry, { workerData: { corpus: this.corpus, hash: this.hash } });
    worker.unref();
    worker.on('message', (answer: LocalSearchAnswer) => {
      if ('failed' in answer) {
        this.broken = answer.failed;
        this.failAll(new SearchProviderError(answer.failed));
      } else this.settle(answer.id, undefined, answer.results);
    });
    const gone = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.failAll(new SearchProviderError(why));
    };
    worker.on('error', () => gone('local search failed'));
    worker.once('exit', () => gone('local search stopped'));
    this.worker = worker;
    return worker;
  }

  private settle(id: number, error: Error | undefined, results?: SearchResult[]): void {
    const waiter = this.waiting.get(id);
    if (!waiter) return; // Answered after its caller stopped waiting (a timeout).
    this.waiting.delete(id);
    if (this.waiting.size === 0) this.worker?.unref();
    if (error) waiter.reject(error);
    else waiter.resolve(results!);
  }

  private failAll(error: Error): void {
    for (const id of [...this.waiting.keys()]) this.settle(id, error);
  }
}
