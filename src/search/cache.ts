import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SearchResult } from './provider.js';

/**
 * Search results kept across runs and servers, in a SQLite file of their own under the server's home: a query asked
 * again (by any run, of the same provider) is answered from here, so runs are reproducible and cost the provider
 * nothing twice. Keyed by the provider's cache id, the query as asked (spaces collapsed) and how many results.
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
    this.db.exec(`CREATE TABLE IF NOT EXISTS search_results (
      provider TEXT NOT NULL,
      query TEXT NOT NULL,
      top_k INTEGER NOT NULL,
      results TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (provider, query, top_k)
    )`);
    this.getStatement = this.db.prepare('SELECT results FROM search_results WHERE provider = ? AND query = ? AND top_k = ?');
    this.putStatement = this.db.prepare(
      'INSERT OR IGNORE INTO search_results (provider, query, top_k, results, created_at) VALUES (?, ?, ?, ?, ?)',
    );
  }

  get(provider: string, query: string, topK: number): SearchResult[] | undefined {
    const row = this.getStatement.get(provider, query, topK) as { results: string } | undefined;
    return row ? (JSON.parse(row.results) as SearchResult[]) : undefined;
  }

  /** Keeps the first answer: a query asked again is answered as it was the first time. */
  put(provider: string, query: string, topK: number, results: SearchResult[]): void {
    this.putStatement.run(provider, query, topK, JSON.stringify(results), Date.now());
  }

  close(): void {
    this.db.close();
  }
}
