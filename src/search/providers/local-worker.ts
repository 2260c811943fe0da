import { readFileSync, readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { sha256 } from '../../util/hashing.js';
import type { SearchResult } from '../provider.js';
import { Bm25Index, parseCorpus } from './bm25.js';

/**
 * The local provider's thread (src/search/providers/local.ts starts it from dist/): it indexes the corpus the server
 * checked, then ranks each query it is sent, in the order sent, skipping those abandoned (`{abandoned: id}`: their
 * caller stopped waiting) before their turn. Answers `{id, results}`; `{failed}` when the corpus is no longer the one
 * checked (it changed on disk), after which it exits.
 */
export type LocalSearchRequest = { id: number; query: string; topK: number } | { abandoned: number };
export type LocalSearchAnswer = { id: number; results: SearchResult[] } | { failed: string };

const { corpus, hash } = workerData as { corpus: string; hash: string };

// Ranking yields to the server's own thread: a run's searches must not take the CPU its calls need (invariant 9). Nice
// 10 weighs about a tenth of nice-0 work, so ranking still gets its share on a host busy with training jobs: at 19
// (about 1.5%) queries overran the provider's 10 s timeout there and every local search failed.
// A thread's nice value is its own on Linux; where /proc/thread-self is missing, it keeps the server's.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
} catch {
  // Not Linux, or no /proc: the same priority as the server.
}

const raw = readFileSync(corpus, 'utf8');
if (sha256(raw) !== hash) {
  parentPort!.postMessage({ failed: 'the local corpus changed since the server started; the operator must restart it' });
  process.exit(0);
}
const index = new Bm25Index(parseCorpus(raw, corpus));
/** Queries waiting for their turn, in the order sent. */
const queue = new Map<number, { query: string; topK: number }>();
let scheduled = false;
// One query per turn of the event loop: the messages that came in while it was ranked (abandonments among them) are
// taken in before the next, so a query its caller gave up on while it waited is not ranked.
const rankNext = () => {
  scheduled = false;
  const next = queue.entries().next();
  if (next.done) return;
  const [id, { query, topK }] = next.value;
  queue.delete(id);
  parentPort!.postMessage({ id, results: index.search(query, topK) } satisfies LocalSearchAnswer);
  if (queue.size > 0) schedule();
};
const schedule = () => {
  if (scheduled) return;
  scheduled = true;
  setImmediate(rankNext);
};
parentPort!.on('message', (request: LocalSearchRequest) => {
  if ('abandoned' in request) queue.delete(request.abandoned);
  else {
    queue.set(request.id, { query: request.query, topK: request.topK });
    schedule();
  }
});
