/**
 * The floor the server's per-call overhead is measured against: a bare MCP SDK server with one
 * tool, `budget_status`, answering a fixed result of the same shape as a2rl's. Nothing is
 * recorded, authenticated or read from a store.
 *
 *   node dist/bench/bare-server.js stdio        # MCP over stdin/stdout
 *   node dist/bench/bare-server.js stdio DB     # the same, committing each call's event to the SQLite file DB
 *                                                # before answering, as invariant 5 makes a2rl do
 *   node dist/bench/bare-server.js http         # Streamable HTTP on node:http, a free loopback port;
 *                                                # prints "listening on http://127.0.0.1:PORT" on stderr
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';

const line = z.object({ used: z.number(), limit: z.number(), left: z.number() });
const answer = {
  run_id: 'bare',
  task_id: 'micro-gsm8k',
  run_state: 'active' as const,
  end_reason: null,
  wall_seconds: { used: 12.3, limit: 1800, left: 1787.7 },
  compute_seconds: { used: 4.5, limit: 1200, left: 1195.5 },
  submissions: { used: 0, limit: 10, left: 10 },
  rollout_episodes: { used: 0, limit: 2000, left: 2000 },
  exhausted: [] as string[],
  disk_bytes: { used: 4096, limit: 2 ** 30, left: 2 ** 30 - 4096 },
};

/**
 * One committed insert per call, as a2rl's store makes it: WAL, synchronous NORMAL, foreign keys on, the events
 * table with its index and its reference to the run.
 */
function eventCommitter(path: string): (data: unknown) => void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.exec(`CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY);
           INSERT OR IGNORE INTO runs (id) VALUES ('bare');
           CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id),
             at INTEGER NOT NULL, t_rel_ms INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL);
           CREATE INDEX IF NOT EXISTS events_by_kind ON events(run_id, kind, name);`);
  const insert = db.prepare(`INSERT INTO events (run_id, at, t_rel_ms, kind, name, data)
                               VALUES (@run_id, @at, @t_rel_ms, @kind, @name, @data)`);
  const startedAt = Date.now();
  return (data) => {
    const at = Date.now();
    insert.run({ run_id: 'bare', at, t_rel_ms: at - startedAt, kind: 'tool', name: 'budget_status', data: JSON.stringify(data) });
  };
}

function bareServer(commit?: (data: unknown) => void): McpServer {
  const server = new McpServer({ name: 'bare', version: '1' });
  server.registerTool(
    'budget_status',
    {
      title: 'Budget',
      description: 'A fixed budget report.',
      inputSchema: z.object({}).strict(),
      outputSchema: z.object({
        run_id: z.string(),
        task_id: z.string(),
        run_state: z.enum(['active', 'ended']),
        end_reason: z.string().nullable(),
        wall_seconds: line,
        compute_seconds: line,
        submissions: line,
        rollout_episodes: line,
        exhausted: z.array(z.string()),
        disk_bytes: line,
      }),
    },
    async (args) => {
      commit?.({ arguments: args, result: answer, duration_ms: 0 });
      return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
    },
  );
  return server;
}

async function serveHttp(): Promise<void> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const server = createHttpServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const body = req.method === 'POST' ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    const id = req.headers['mcp-session-id'];
    const existing = typeof id === 'string' ? sessions.get(id) : undefined;
    if (existing) return existing.handleRequest(req, res, body);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (sessionId) => void sessions.set(sessionId, transport),
    });
    transport.onclose = () => transport.sessionId !== undefined && sessions.delete(transport.sessionId);
    await bareServer().connect(transport);
    await transport.handleRequest(req, res, body);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stderr.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
}

const mode = process.argv[2];
if (mode === 'stdio') await bareServer(process.argv[3] ? eventCommitter(process.argv[3]) : undefined).connect(new StdioServerTransport());
else if (mode === 'http') await serveHttp();
else {
  process.stderr.write('usage: bare-server.js stdio [DB]|http\n');
  process.exit(2);
}
