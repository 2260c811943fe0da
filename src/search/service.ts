import { join } from 'node:path';
import type { Store } from '../store/store.js';
import type { RecordEvent } from '../store/events.js';
import { sha256 } from '../util/hashing.js';
import { packageRoot } from '../util/paths.js';
import { SearchCache } from './cache.js';
import { SearchChannel } from './channel.js';
import type { SearchProvider, SearchSettings } from './provider.js';
import { createSearchProvider } from './providers/index.js';

/** The Python client the sandbox imports (`from a2rl_search import search`), shown read-only under the workspace's lib/. */
export const searchClientLibrary = { name: 'a2rl_search', source: join(packageRoot, 'src', 'search', 'client', 'a2rl_search') };

/** The cache file under the server's home, shared by every server on it; each run sees only its own answers. */
export const searchCacheFile = 'search-cache.sqlite';

/**
 * The cache scope of every grading's queries: the server's own, asked by the graded checkpoints, never shown to an
 * agent, so shared (a baseline and the runs' gradings of one task ask the provider once).
 */
export const gradingCacheScope = 'grading';

/**
 * The server's search: one provider and the query cache, and a channel for each run whose budget allows queries.
 * Built once per server from `serve --search`; the provider's key lives here only.
 */
export class SearchService {
  private constructor(
    readonly provider: SearchProvider,
    readonly cache: SearchCache,
  ) {}

  /** Checks the settings (an unknown provider, a missing key or corpus is refused before anything starts). */
  static create(settings: SearchSettings, home: string): SearchService {
    const provider = createSearchProvider(settings);
    return new SearchService(provider, new SearchCache(join(home, searchCacheFile)));
  }

  /** Opens a run's channel, counting the queries it already made (under a server before this one). */
  open(run: { id: string; dir: string; limit: number; record: RecordEvent }, store: Store): Promise<SearchChannel> {
    const { counted } = store.db
      .prepare("SELECT COUNT(*) AS counted FROM events WHERE run_id = ? AND kind = 'search' AND name = 'query'")
      .get(run.id) as { counted: number };
    return SearchChannel.open({
      runDir: run.dir,
      provider: this.provider,
      cache: this.cache,
      cacheScope: run.id,
      limit: run.limit,
      counted,
      record: run.record,
    });
  }

  /**
   * Opens a grading's channel in `dir`: answered by the same provider as the runs', from the gradings' own cache, recorded in the graded
   * run's events as the server's own queries (`grading_query`), counted against no budget, never refused for the run's
   * sake (a baseline or a regrade may be graded after the run ended).
   */
  async openForGrading(options: { dir: string; record: RecordEvent }): Promise<SearchChannel> {
    const channel = await SearchChannel.open({
      runDir: options.dir,
      provider: this.provider,
      cache: this.cache,
      cacheScope: gradingCacheScope,
      limit: Number.POSITIVE_INFINITY,
      counted: 0,
      record: options.record,
      purpose: 'grading',
    });
    channel.admitThrough({ searchRefusal: () => undefined });
    return channel;
  }

  /** What a search task's grades depend on besides the checkpoint: the provider and what changes its answers (never its key). */
  get gradingVersion(): string {
    return `search:${this.provider.name}@${sha256(this.provider.cacheId).slice(0, 8)}`;
  }

  close(): void {
    void this.provider.close?.();
    this.cache.close();
  }
}
