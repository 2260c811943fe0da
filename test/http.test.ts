import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/paths.js';
import { Store } from '../src/store.js';
import { call } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';

const cli = join(packageRoot, 'dist/src/cli.js');
const adminToken = 'test-admin-token';
const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** `a2rl serve --http` on a free port, with the URL it prints. */
async function startHttpServer(home: string): Promise<{ child: ChildProcess; url: string; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [cli, 'serve', '--http', '--port', '0'], {
    env: { ...process.env, A2RL_HOME: home, A2RL_ADMIN_TOKEN: adminToken },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    let stderr = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${stderr}`)), 30_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
  });
  return { child, url, exited };
}

async function cliRun(home: string, args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [cli, ...args], { env: { ...process.env, A2RL_HOME: home } });
  return stdout;
}

async function createRun(home: string, budget = 'wall=30m'): Promise<{ run_id: string; token: string }> {
  return JSON.parse(await cliRun(home, ['runs', 'create', '--task', 'micro-gsm8k', '--budget', budget, '--label', 'http-test', '--json']));
}

async function connect(url: string, token: string, transport: 'streamable' | 'sse'): Promise<Client> {
  const requestInit = { headers: { Authorization: `Bearer ${token}` } };
  const client = new Client({ name: 'a2rl-test', version: '1' });
  await client.connect(
    transport === 'streamable'
      ? new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit })
      : new SSEClientTransport(new URL(`${url}/sse`), { requestInit }),
  );
  return client;
}

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A plain HTTP request, for what a client library would not send (a foreign Host, an oversized body). */
function raw(
  url: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string; keepOpen?: boolean },
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(options.path, url), { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    if (options.keepOpen) req.write(options.body ?? '');
    else req.end(options.body);
  });
}

/** Opens an HTTP+SSE stream by hand; resolves with its session id (from the endpoint event) while it stays open. */
function openSseStream(url: string, token: string): Promise<{ sessionId: string; close: () => void }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL('/sse', url), { headers: { Authorization: `Bearer ${token}` } }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => {
        body += chunk;
        const match = /sessionId=([\w-]+)/.exec(body);
        if (match) resolve({ sessionId: match[1]!, close: () => req.destroy() });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

const jsonHeaders = (token: string) => ({
  Authorization: `Bearer ${token}`,
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
});

describe('MCP over HTTP', () => {
  const home = tempDir('http');
  let server: Awaited<ReturnType<typeof startHttpServer>>;
  let first: { run_id: string; token: string };
  let second: { run_id: string; token: string };
  const clients: Client[] = [];
  const open = async (token: string, transport: 'streamable' | 'sse') => {
    const client = await connect(server.url, token, transport);
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    [first, second] = [await createRun(home), await createRun(home)];
    server = await startHttpServer(home);
  });

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    server?.child.kill('SIGKILL');
  });

  it('prints a token and ready-to-paste client configuration', async () => {
    const printed = await cliRun(home, ['runs', 'create', '--task', 'micro-gsm8k', '--url', 'http://10.0.0.5:8700/mcp']);
    const token = /^token (\S+)$/m.exec(printed)![1]!;
    expect(token).toMatch(/^[\w-]{43}$/);
    expect(printed).toContain(`claude mcp add --transport http a2rl http://10.0.0.5:8700/mcp --header "Authorization: Bearer ${token}"`);
    expect(printed).toContain('[mcp_servers.a2rl]');
    expect(printed).toContain('"mcpServers"');
    const store = new Store(join(home, 'store.sqlite'));
    try {
      // Only the hash is kept.
      expect(JSON.stringify(store.db.prepare('SELECT * FROM run_tokens').all())).not.toContain(token);
    } finally {
      store.close();
    }
    expect(await cliRun(home, ['runs', 'list'])).toMatch(new RegExp(`${first.run_id}\\tmicro-gsm8k\\thttp-test\\thttp\\tactive`));
  });

  it.each(['streamable', 'sse'] as const)('lists the tools and reports the budget over %s', async (transport) => {
    const client = await open(first.token, transport);
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(13);
    const budget = await call(client, 'budget_status');
    expect(budget.structured).toMatchObject({ run_id: first.run_id, task_id: 'micro-gsm8k', run_state: 'active' });
  });

  it('refuses a missing, wrong or revoked token with 401 and names no run', async () => {
    const victim = await createRun(home);
    const victimClient = await open(victim.token, 'streamable');
    expect((await call(victimClient, 'budget_status')).structured.run_id).toBe(victim.run_id);
    const training = await call(victimClient, 'run_training', { command: 'sleep 300' });
    expect(training.structured.state).toBe('running');
    await cliRun(home, ['runs', 'revoke', victim.run_id]);
    const headers = jsonHeaders('x');
    for (const authorization of [undefined, 'Bearer wrong-token', `Bearer ${victim.token}`, `Basic ${first.token}`]) {
      const { Authorization: _, ...rest } = headers;
      const response = await raw(server.url, {
        method: 'POST',
        path: '/mcp',
        headers: authorization ? { ...rest, Authorization: authorization } : rest,
        body: JSON.stringify(initialize),
      });
      expect(response.status, authorization).toBe(401);
      expect(response.headers['www-authenticate']).toBe('Bearer');
      expect(JSON.parse(response.body).error).toBe('UNAUTHORIZED');
      for (const id of [first.run_id, second.run_id, victim.run_id]) expect(response.body).not.toContain(id);
    }
    const sse = await raw(server.url, { path: '/sse', headers: { Authorization: 'Bearer wrong-token' } });
    expect(sse.status).toBe(401);
    // A session opened before the revocation is refused from its next request on.
    await expect(victimClient.callTool({ name: 'budget_status', arguments: {} })).rejects.toThrow(/UNAUTHORIZED.*not valid/);
    expect(await cliRun(home, ['runs', 'list'])).toMatch(
      new RegExp(`${victim.run_id}.*http, revoked\\tended \\(revoked by the operator\\)`),
    );
    // The server serving the run stops its jobs at its next budget check.
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const deadline = Date.now() + 15_000;
      while (store.listJobs(victim.run_id, ['training'])[0]!.state === 'running' && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(store.listJobs(victim.run_id, ['training'])[0]).toMatchObject({
        state: 'cancelled',
        reason: 'the run ended: revoked by the operator',
      });
    } finally {
      store.close();
    }
  });

  it("answers another run's job id with the tool's not-found error", async () => {
    const mine = await open(first.token, 'streamable');
    const job = await call(mine, 'exec', { command: 'echo hi' });
    expect(job.structured.output).toBe('hi\n');
    const theirs = await open(second.token, 'sse');
    for (const tool of ['job_status', 'job_logs', 'cancel_job']) {
      const result = await call(theirs, tool, { job_id: job.structured.job_id });
      expect(result.isError, tool).toBe(true);
      expect(result.text).toMatch(/\[NOT_FOUND\] No job/);
    }
  });

  it('refuses a foreign Host or Origin with 403 and a body over 4 MiB with 413', async () => {
    const body = JSON.stringify(initialize);
    const foreignHost = await raw(server.url, {
      method: 'POST',
      path: '/mcp',
      headers: { ...jsonHeaders(first.token), Host: 'evil.example:80' },
      body,
    });
    expect(foreignHost.status).toBe(403);
    expect(JSON.parse(foreignHost.body).message).toMatch(/--allow-host/);
    const foreignOrigin = await raw(server.url, {
      method: 'POST',
      path: '/mcp',
      headers: { ...jsonHeaders(first.token), Origin: 'http://evil.example' },
      body,
    });
    expect(foreignOrigin.status).toBe(403);
    const localOrigin = await raw(server.url, { path: '/healthz', headers: { Origin: server.url } });
    expect(localOrigin.status).toBe(200);
    // Refused on the declared length, before the body is read: the client sends only its first bytes.
    const huge = await raw(server.url, {
      method: 'POST',
      path: '/mcp',
      headers: { ...jsonHeaders(first.token), 'Content-Length': String(5 * 2 ** 20) },
      body: JSON.stringify(initialize),
      keepOpen: true,
    });
    expect(huge.status).toBe(413);
    expect(JSON.parse(huge.body).message).toMatch(/over 4 MiB/);
  });

  it("refuses a session id on the other transport's endpoint with 400", async () => {
    const streamable = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${first.token}` } },
    });
    const client = new Client({ name: 'a2rl-test', version: '1' });
    await client.connect(streamable);
    clients.push(client);
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' });
    const onSse = await raw(server.url, {
      method: 'POST',
      path: `/messages?sessionId=${streamable.sessionId}`,
      headers: jsonHeaders(first.token),
      body: ping,
    });
    expect(onSse.status).toBe(400);
    expect(JSON.parse(onSse.body).message).toMatch(/Streamable HTTP session.*\/mcp/);
    const sse = await openSseStream(server.url, first.token);
    const onMcp = await raw(server.url, {
      method: 'POST',
      path: '/mcp',
      headers: { ...jsonHeaders(first.token), 'Mcp-Session-Id': sse.sessionId },
      body: ping,
    });
    sse.close();
    expect(onMcp.status).toBe(400);
    expect(JSON.parse(onMcp.body).message).toMatch(/HTTP\+SSE session.*\/messages\?sessionId=/);
    // Another run's token learns nothing about the session: it is unknown.
    const otherRun = await raw(server.url, {
      method: 'POST',
      path: '/mcp',
      headers: { ...jsonHeaders(second.token), 'Mcp-Session-Id': streamable.sessionId! },
      body: ping,
    });
    expect(otherRun.status).toBe(404);
  });

  it('continues the same run after a disconnect: workspace and budget', async () => {
    const before = await open(second.token, 'streamable');
    await call(before, 'write_file', { path: 'code/note.txt', content: 'from session one\n' });
    await call(before, 'exec', { command: 'python3 -c "sum(range(3_000_000))"' });
    const spent = (await call(before, 'budget_status')).structured;
    await before.close();
    const after = await open(second.token, 'sse');
    expect((await call(after, 'read_file', { path: 'code/note.txt' })).structured.content).toBe('from session one\n');
    const budget = (await call(after, 'budget_status')).structured;
    expect(budget.run_id).toBe(second.run_id);
    expect(budget.compute_seconds.used).toBeGreaterThanOrEqual(spent.compute_seconds.used);
    expect(budget.compute_seconds.used).toBeGreaterThan(0);
    expect(budget.wall_seconds.used).toBeGreaterThanOrEqual(spent.wall_seconds.used);
  });

  it('creates runs over HTTP with the admin token only', async () => {
    const body = JSON.stringify({ task: 'micro-gsm8k', budget: 'wall=20m', label: 'posted' });
    const headers = (token: string) => ({ Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' });
    expect((await raw(server.url, { method: 'POST', path: '/runs', headers: headers(first.token), body })).status).toBe(401);
    const bad = await raw(server.url, { method: 'POST', path: '/runs', headers: headers(adminToken), body: '{"task": 3}' });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).message).toMatch(/"task": "micro-gsm8k"/);
    const created = await raw(server.url, { method: 'POST', path: '/runs', headers: headers(adminToken), body });
    expect(created.status).toBe(201);
    const { run_id, token } = JSON.parse(created.body);
    const client = await open(token, 'streamable');
    expect((await call(client, 'budget_status')).structured).toMatchObject({ run_id, wall_seconds: { limit: 1200 } });
  });

  it('answers /healthz and exposes Prometheus metrics', async () => {
    const health = await raw(server.url, { path: '/healthz' });
    expect(health).toMatchObject({ status: 200, body: 'ok\n' });
    const metrics = (await raw(server.url, { path: '/metrics' })).body;
    expect(metrics).toMatch(/^# TYPE a2rl_runs_active gauge$/m);
    expect(Number(/^a2rl_runs_active (\d+)$/m.exec(metrics)![1])).toBeGreaterThanOrEqual(3);
    expect(metrics).toMatch(/^a2rl_jobs_running \d+$/m);
    expect(metrics).toMatch(/^a2rl_tool_calls_total\{tool="budget_status",outcome="ok"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^a2rl_tool_calls_total\{tool="job_status",outcome="error"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^a2rl_tool_call_seconds_bucket\{tool="exec",le="\+Inf"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^a2rl_tool_call_seconds_count\{tool="exec"\} [1-9]\d*$/m);
  });

  it('stops on SIGTERM leaving runs active, and a restarted server continues them', async () => {
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const store = new Store(join(home, 'store.sqlite'));
    try {
      expect(store.getRun(second.run_id)!.state).toBe('active');
    } finally {
      store.close();
    }
    server = await startHttpServer(home);
    const client = await open(second.token, 'streamable');
    expect((await call(client, 'read_file', { path: 'code/note.txt' })).structured.content).toBe('from session one\n');
    expect((await call(client, 'budget_status')).structured).toMatchObject({ run_id: second.run_id, run_state: 'active' });
  });
});
