/**
 * The floor the server's per-call overhead is measured against: a bare MCP SDK server with one
 * tool, `budget_status`, answering a fixed result of the same shape as a2rl's. Nothing is
 * authenticated or read from a store, and nothing is recorded unless it is given a store (stdio DB).
 *
 *   node dist/bench/bare-server.js stdio        # MCP over stdin/stdout
 *   node dist/bench/bare-server.js stdio DB     # the same, committing each call's event to an a2rl store at DB
 *                                                # before answering, as invariant 5 makes a2rl do
 *   node dist/bench/bare-server.js http         # Streamable HTTP on node:http, a free loopback port;
 *                                                # prints "listening on http://127.0.0.1:PORT" on stderr
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { z } from 'zod';
import { eventRecorder, type RecordEvent } from '../src/store/events.js';
import { Store } from '../src/store/store.js';

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

/** a2rl's own store and event recorder, with one run: each call's event committed as a2rl's stdio server commits it. */
function storeRecorder(path: string): RecordEvent {
  const store = new Store(path);
  store.checkpointInBackground();
  const createdAt = Date.now();
  store.insertRun({
    id: 'bare',
    task_id: 'micro-gsm8k',
    label: null,
    budget: '{}',
    dir: dirname(path),
    sandbox: 'none',
    grader_version: '1',
    owner: 'bare',
    created_at: createdAt,
  });
  return eventRecorder(store, 'bare', createdAt);
}

function bareServer(record?: RecordEvent): McpServer {
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
      record?.('tool', 'budget_status', { arguments: args, result: answer, duration_ms: 0 });
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
if (mode === 'stdio') await bareServer(process.argv[3] ? storeRecorder(process.argv[3]) : undefined).connect(new StdioServerTransport());
else if (mode === 'http') await serveHttp();
else {
  process.stderr.write('usage: bare-server.js stdio [DB]|http\n');
  process.exit(2);
}
