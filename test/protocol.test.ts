import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processStartTime } from '../sandbox/process-tree.js';
import { maxSessionEventBytes, maxSessionEvents, SessionEventStore } from '../src/mcp/transports/http/event-store.js';
import { maxSessionsPerRun } from '../src/mcp/transports/http/sessions.js';
import { Store } from '../src/store/store.js';
import { cliEntry } from '../src/util/paths.js';
import { adminToken, type HttpServer, killServer, startHttpServer } from './helpers/http-server.js';
import { call } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';

/** Polls `look` until it returns something other than undefined, or fails after `ms`. */
async function until<T>(what: string, look: () => T | undefined, ms = 60_000): Promise<T> {
  for (const deadline = Date.now() + ms; ; await new Promise((resolve) => setTimeout(resolve, 50))) {
    const found = look();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
  }
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

describe('MCP protocol over Streamable HTTP', () => {
  const home = tempDir('protocol');
  let server: HttpServer;
  const clients: Client[] = [];
  const withStore = <T>(look: (store: Store) => T): T => {
    const store = new Store(join(home, 'store.sqlite'));
    try {
      return look(store);
    } finally {
      store.close();
    }
  };
  const newRun = async (): Promise<{ run_id: string; token: string }> => {
    const response = await fetch(`${server.url}/runs`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ task: 'micro-gsm8k', budget: 'wall=30m', label: 'protocol' }),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as { run_id: string; token: string };
  };
  const connect = async (token: string, fetchVia: FetchLike = fetch): Promise<Client> => {
    const client = new Client({ name: 'a2rl-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
        fetch: fetchVia,
        reconnectionOptions: { initialReconnectionDelay: 10, maxReconnectionDelay: 100, reconnectionDelayGrowFactor: 1, maxRetries: 5 },
      }),
    );
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    server = await startHttpServer(home);
  });

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  it('a cancelled exec stops its job: no side effect, its slot free for the next call, recorded as cancelled', async () => {
    const run = await newRun();
    const client = await connect(run.token);
    // Both of the run's exec slots taken; each call cancelled once its job runs (its first progress says so).
    const cancelled = await Promise.all(
      ['one', 'two'].map(async (name) => {
        const controller = new AbortController();
        let started!: () => void;
        const running = new Promise<void>((resolve) => (started = resolve));
        const answer = client.callTool({ name: 'exec', arguments: { command: `sleep 2; touch code/${name}` } }, undefined, {
          signal: controller.signal,
          onprogress: () => started(),
        });
        await running;
        controller.abort('changed my mind');
        return answer.then(
          () => 'answered',
          (error: Error) => error.message,
        );
      }),
    );
    for (const outcome of cancelled) expect(outcome).toMatch(/changed my mind/);
    // The server has both cancellations once it has recorded them.
    const records = await until('the cancellations on record', () => {
      const tools = withStore((store) => store.listEvents(run.run_id, 'tool'));
      return tools.length === 2 ? tools : undefined;
    });
    for (const event of records) {
      expect(event.name).toBe('exec');
      expect(JSON.parse(event.data)).toMatchObject({ error: 'cancelled by the client: changed my mind' });
    }
    // Not CONFLICT: the cancelled calls hold no slot. The command outlives the cancelled ones' sleep: had they gone on, their files would be there.
    const next = await call(client, 'exec', { command: 'sleep 3; ls code' });
    expect(next.isError, next.text).toBe(false);
    expect(next.structured.output).not.toMatch(/one|two/);
    const jobs = withStore((store) => store.listJobs(run.run_id, ['exec']));
    expect(jobs.map((job) => [job.state, job.reason])).toEqual([
      ['cancelled', 'the client cancelled the call'],
      ['cancelled', 'the client cancelled the call'],
      ['succeeded', null],
    ]);
  });

  it("an exec that ignores TERM, cancelled five times in a row, never leaves more than 2 of the run's jobs live", async () => {
    const run = await newRun();
    const client = await connect(run.token);
    const execs = () => withStore((store) => store.listJobs(run.run_id, ['exec']));
    for (let i = 0; i < 5; i++) {
      const controller = new AbortController();
      const answer = client.callTool({ name: 'exec', arguments: { command: "trap '' TERM; echo ready; sleep 30" } }, undefined, {
        signal: controller.signal,
      });
      // Cancelled once the command ignores TERM (sleep inherits it): a stop that waits out a grace finds it still alive.
      await until('the command ignoring TERM', () => {
        const job = execs()[i];
        return job && existsSync(job.log_path) && readFileSync(job.log_path, 'utf8').includes('ready') ? true : undefined;
      });
      controller.abort('again');
      await answer.catch(() => undefined);
    }
    const next = await call(client, 'exec', { command: 'echo done' });
    expect(next.isError, next.text).toBe(false);
    // The last cancelled one may still be going (it holds the second slot, which is why `echo done` could start): its
    // end is recorded once its processes are gone, however long that takes on a loaded machine.
    const jobs = await until('every exec ended', () => {
      const all = execs();
      return all.every((job) => job.state !== 'running') ? all : undefined;
    });
    expect(jobs.map((job) => job.state)).toEqual([...Array<string>(5).fill('cancelled'), 'succeeded']);
    // Live together when each started: the jobs from their insert to their end on record.
    const live = jobs.map(
      (job) => jobs.filter((other) => other.created_at <= job.created_at && (other.ended_at ?? Infinity) > job.created_at).length,
    );
    expect(Math.max(...live)).toBeLessThanOrEqual(2);
  });

  it('a stream dropped mid-call resumes with Last-Event-ID and gets the answer sent meanwhile', async () => {
    const run = await newRun();
    const resumedFrom: string[] = [];
    let dropped = false;
    const flaky: FetchLike = async (url, init) => {
      const lastEventId = new Headers(init?.headers).get('last-event-id');
      if (lastEventId) {
        resumedFrom.push(lastEventId);
        // Back only once the answer went out to no one: it must come from the session's event store.
        await until('the exec answered', () =>
          withStore((store) => store.listEvents(run.run_id, 'tool')).some((event) => event.name === 'exec') ? true : undefined,
        );
      }
      const response = await fetch(url, init);
      if (dropped || init?.method !== 'POST' || !String(init.body).includes('"tools/call"')) return response;
      dropped = true;
      // The link fails after the stream's first event (its priming event, which carries an id and no message).
      const reader = response.body!.getReader();
      const first = await reader.read();
      expect(new TextDecoder().decode(first.value)).toMatch(/^id: \S+\ndata: \n\n$/);
      await reader.cancel();
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        // The event is read before the failure (an error at once would discard what is queued).
        pull: (controller) => {
          if (pulls++ === 0) controller.enqueue(first.value!);
          else controller.error(new TypeError('network connection lost'));
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const client = await connect(run.token, flaky);
    const answer = await call(client, 'exec', { command: 'sleep 1; echo answered while away' });
    expect(dropped).toBe(true);
    expect(resumedFrom).toHaveLength(1);
    expect(answer.isError, answer.text).toBe(false);
    expect(answer.structured.output).toBe('answered while away\n');
  });

  it('a run holds at most maxSessionsPerRun sessions: CONFLICT beyond, until one closes; other runs unaffected', async () => {
    const [run, other] = [await newRun(), await newRun()];
    const open = (token: string) =>
      fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
        body: JSON.stringify(initialize),
      });
    const ids: string[] = [];
    for (let i = 0; i < maxSessionsPerRun; i++) {
      const response = await open(run.token);
      expect(response.status).toBe(200);
      ids.push(response.headers.get('mcp-session-id')!);
      await response.body?.cancel();
    }
    const refused = await open(run.token);
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /^\[CONFLICT\] This run has 16 MCP sessions open.*DELETE \/mcp/,
    );
    const elsewhere = await open(other.token);
    expect(elsewhere.status).toBe(200);
    await elsewhere.body?.cancel();
    const closed = await fetch(`${server.url}/mcp`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${run.token}`, 'Mcp-Session-Id': ids[0]! },
    });
    expect(closed.status).toBe(200);
    const again = await open(run.token);
    expect(again.status).toBe(200);
    await again.body?.cancel();
  });

  it('answers HTTP-level refusals on /mcp as JSON-RPC errors with their HTTP status', async () => {
    const run = await newRun();
    const headers = {
      Authorization: `Bearer ${run.token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    };
    const cases: Array<{ init: RequestInit; status: number; code: number; message: RegExp }> = [
      { init: { method: 'POST', headers, body: '{"jsonrpc": "2.0", "id": 1,' }, status: 400, code: -32700, message: /not JSON/ },
      {
        init: { method: 'POST', headers: { ...headers, 'Mcp-Session-Id': 'no-such-session' }, body: JSON.stringify(initialize) },
        status: 404,
        code: -32001,
        message: /^\[NOT_FOUND\] No session "no-such-session".*Connect again/,
      },
      {
        init: { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) },
        status: 400,
        code: -32600,
        message: /starts with an initialize request/,
      },
      { init: { method: 'PUT', headers, body: '{}' }, status: 405, code: -32000, message: /Method not allowed.*GET, POST, DELETE/ },
      {
        init: { method: 'POST', headers: { ...headers, Authorization: 'Bearer wrong' }, body: '{}' },
        status: 401,
        code: -32000,
        message: /not valid/,
      },
    ];
    for (const { init, status, code, message } of cases) {
      const response = await fetch(`${server.url}/mcp`, init);
      const body = (await response.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
      expect(response.status, `${init.method} ${String(init.body)}`).toBe(status);
      expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code } });
      expect(body.error.message).toMatch(message);
      if (status === 405) expect(response.headers.get('allow')).toBe('GET, POST, DELETE');
    }
  });
});

describe('serve and its parent', () => {
  it('a server ends with the process that started it, unless started with --detach', async () => {
    const folder = tempDir('parent');
    const logOf = (name: string) => join(folder, `${name}.log`);
    for (const name of ['watched', 'detached']) mkdirSync(join(folder, name));
    // A parent that starts two servers whose output outlives it (files, not pipes), prints their pids and waits.
    const parentScript = join(folder, 'parent.cjs');
    writeFileSync(
      parentScript,
      `const { spawn } = require('node:child_process');
const { openSync } = require('node:fs');
const pids = ${JSON.stringify(['watched', 'detached'])}.map((name) =>
  spawn(process.execPath, [${JSON.stringify(cliEntry)}, '--home', ${JSON.stringify(folder)} + '/' + name, 'serve', '--http', '--port', '0', ...(name === 'detached' ? ['--detach'] : [])], {
    stdio: ['ignore', 'ignore', openSync(${JSON.stringify(folder)} + '/' + name + '.log', 'w')],
  }).pid);
process.stdout.write(JSON.stringify(pids) + '\\n');
setInterval(() => undefined, 1000);
`,
    );
    const parent: ChildProcess = spawn(process.execPath, [parentScript], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [watched, detached] = await new Promise<number[]>((resolve) =>
      parent.stdout!.once('data', (line: Buffer) => resolve(JSON.parse(String(line)))),
    );
    const urls = await Promise.all(
      ['watched', 'detached'].map((name) =>
        until(`${name} listening`, () => /listening on (http:\/\/\S+)/.exec(readFileSync(logOf(name), 'utf8'))?.[1]),
      ),
    );
    parent.kill('SIGKILL');
    await until('the watched server gone', () => (processStartTime(watched!) === undefined ? true : undefined));
    expect(readFileSync(logOf('watched'), 'utf8')).toMatch(/is gone; stopping[\s\S]*stopped \(SIGTERM\)/);
    try {
      expect((await fetch(`${urls[1]}/healthz`)).status).toBe(200);
      expect(processStartTime(detached!)).toBeDefined();
    } finally {
      process.kill(detached!, 'SIGTERM');
      await until('the detached server gone', () => (processStartTime(detached!) === undefined ? true : undefined));
    }
  });
});

describe('SessionEventStore', () => {
  it('replays the events of a stream after an id, keeping only the newest within its count and bytes', async () => {
    const store = new SessionEventStore();
    const ids: string[] = [];
    for (let i = 0; i < maxSessionEvents + 10; i++) {
      ids.push(await store.storeEvent(i % 2 === 0 ? 'a' : 'b', { jsonrpc: '2.0', method: 'note', params: { i } }));
    }
    const replay = async (after: string) => {
      const sent: unknown[] = [];
      const stream = await store.replayEventsAfter(after, {
        send: async (_, message) => void sent.push((message as { params: unknown }).params),
      });
      return { stream, sent };
    };
    // The ten oldest are gone; stream a's kept events follow, in order, though the id replayed from was dropped.
    expect(await store.getStreamIdForEventId(ids[0]!)).toBe('a');
    const evens = Array.from({ length: maxSessionEvents / 2 }, (_, k) => ({ i: 10 + 2 * k }));
    expect(await replay(ids[0]!)).toEqual({ stream: 'a', sent: evens });
    expect((await replay(ids.at(-2)!)).sent).toEqual([]);
    // One event over the byte bound leaves only itself.
    await store.storeEvent('a', { jsonrpc: '2.0', method: 'note', params: { big: 'x'.repeat(maxSessionEventBytes) } });
    expect((await replay(ids[0]!)).sent).toHaveLength(1);
    expect((await replay(ids.at(-1)!)).sent).toEqual([]);
  });
});
