import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SearchResult } from './provider.js';

/**
 * Search results kept across servers, in a SQLite file of their own under the server's home: a query a run asks again
 * is answered from here, so its answers do not change under it and cost the provider nothing twice. Keyed by the
 * provider's cache id, the scope (the run's id; every grading shares one), the query as asked (spaces collapsed) and
 * how many results. Per run, not shared: a shared answer comes back faster (and says `cached`), which would tell a
 * run which queries another run asked.
 */
export class SearchCache {
  private readonly db: Database.Database;
  private readonly getStatement: Database.Statement;
  private readonly putStatement: Database.Statement;

  constructor(readonly path: string) {
    mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    // A cache file from before answers were scoped holds answers no run can be told are its own: it starts over
    // (in one transaction, so that two servers opening it at once cannot drop each other's new table).
    this.db
      .transaction(() => {
        const columns = this.db.pragma('table_info(search_results)') as Array<{ name: string }>;
        if (columns.length > 0 && !columns.some((column) => column.name === 'scope')) this.db.exec('DROP TABLE search_results');
        this.db.exec(`CREATE TABLE IF NOT EXISTS search_results (
          provider TEXT NOT NULL,
          scope TEXT NOT NULL,
          query TEXT NOT NULL,
          top_k INTEGER NOT NULL,
          results TEXT NOT NULL,
          created_at INTEGER NOT NULL,
          PRIMARY KEY (provider, scope, query, top_k)
        )`);
      })
      .immediate();
    this.getStatement = this.db.prepare('SELECT results FROM search_results WHERE provider = ? AND scope = ? AND query = ? AND top_k = ?');
    this.putStatement = this.db.prepare(
      'INSERT OR IGNORE INTO search_results (provider, scope, query, top_k, results, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    );
  }

  get(provider: string, scope: string, query: string, topK: number): SearchResult[] | undefined {
    const row = this.getStatement.get(provider, scope, query, topK) as { results: string } | undefined;
    return row ? (JSON.parse(row.results) as SearchResult[]) : undefined;
  }

  /** Keeps the first answer: a query asked again is answered as it was the first time. */
  put(provider: string, scope: string, query: string, topK: number, results: SearchResult[]): void {
    this.putStatement.run(provider, scope, query, topK, JSON.stringify(results), Date.now());
  }

  close(): void {
    this.db.close();
  }
}
