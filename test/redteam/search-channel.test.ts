import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeProvider, startFakeProvider } from '../helpers/fake-search.js';
import { call } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import {
  attack,
  backends,
  connectHttp,
  createHttpRun,
  type HttpServer,
  killServer,
  recordFigure,
  startHttpServer,
  stdioRun,
  withStore,
} from './harness.js';

/**
 * The search channel is the one way out of a run's sandbox (invariant 1: no network; invariant 7's spirit for the
 * provider's key): the sandbox reaches the provider only through its server, never directly, and nothing it can read
 * or be told holds the key. It can ask only what the channel answers, and only as much as its budget allows.
 */

const canary = `searchkey${randomBytes(8).toString('hex')}`;
/** The key travels as an operator gives it: in the server's environment, named by --search-key-env. */
const keyEnv = 'A2RL_TEST_SEARCH_KEY';

/** A probe run in the sandbox: raw requests on the socket, as hostile code would send them; prints one JSON line each. */
const probe = String.raw`
import json, os, socket, sys, threading
path = os.environ["A2RL_SEARCH_SOCKET"]

def raw(request_bytes):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(path)
    s.sendall(request_bytes)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()

def post(body, target="/search"):
    payload = body if isinstance(body, bytes) else body.encode()
    return raw(b"POST " + target.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)

mode = sys.argv[1]
if mode == "hostile":
    cases = {
        "get": raw(b"GET /search HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        "other_path": post(json.dumps({"query": "q"}), "/admin"),
        "traversal": post(json.dumps({"query": "q"}), "/../search"),
        "huge": post(json.dumps({"query": "q" * 200000})),
        "not_json": post("query=q"),
        "top_k": post(json.dumps({"query": "q", "top_k": 1000})),
        "extra_field": post(json.dumps({"query": "q", "api_key": "mine", "url": "http://evil"})),
        "empty": post(json.dumps({"query": "   "})),
        "not_string": post(json.dumps({"query": ["a", "b"]})),
    }
    print(json.dumps({name: [status, json.loads(body).get("error", "")] for name, (status, body) in cases.items()}))
elif mode == "burst":
    answers = []
    def one(i):
        answers.append(post(json.dumps({"query": "burst query %d" % i})))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(json.dumps([[status, json.loads(body).get("error", "")] for status, body in answers]))
`;

for (const backend of backends) {
  describe(`search channel (${backend})`, () => {
    const home = tempDir('redteam-search');
    let provider: FakeProvider;
    let run: Awaited<ReturnType<typeof stdioRun>>;
    const exec = async (command: string) => (await call(run.client, 'exec', { command })).structured;

    beforeAll(async () => {
      provider = await startFakeProvider('serpapi', { apiKey: canary });
      process.env[keyEnv] = canary;
      try {
        run = await stdioRun(home, backend, {
          budget: 'searches=20',
          serverArgs: ['--search', 'serpapi', '--search-key-env', keyEnv, '--search-url', provider.url],
        });
      } finally {
        delete process.env[keyEnv];
      }
      await call(run.client, 'write_file', { path: 'code/probe.py', content: probe });
    });
    afterAll(async () => {
      await run?.client.close();
      await provider?.close();
    });

    it('the provider is out of reach except through the server: no route to it, no name resolves', async () => {
      await attack('search-channel', 'direct provider', backend, async () => {
        const { port } = new URL(provider.url);
        const direct = await exec(
          `python3 -c 'import socket; socket.create_connection(("127.0.0.1", ${port}), timeout=3); print("CONNECTED")' 2>&1 | tail -1; ` +
            `python3 -c 'import socket; socket.getaddrinfo("serpapi.com", 443); print("RESOLVED")' 2>&1 | tail -1`,
        );
        expect(direct.output).not.toContain('CONNECTED');
        expect(direct.output).not.toContain('RESOLVED');
        expect(provider.requests).toHaveLength(0);
        // Through the channel it works.
        const found = await exec(`python3 -c 'from a2rl_search import observation; print(observation("x marks the spot"))'`);
        expect(found.output).toContain('snippet 1 about x marks the spot');
        expect(provider.requests).toHaveLength(1);
      });
    });

    it("the key is nowhere the sandbox can look: its environment, its files, the channel's answers", async () => {
      await attack('search-channel', 'read the key', backend, async () => {
        const looked = await exec(
          `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ` +
            // The canary in two halves: the command is recorded, and the record must not hold it whole.
            `half=${canary.slice(0, 6)}; grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr "\${half}${canary.slice(6)}" / 2>/dev/null; ` +
            'ls -la /run/a2rl/search; echo done',
        );
        expect(looked.output).toContain('done');
        expect(looked.output).toContain('A2RL_SEARCH_SOCKET=/run/a2rl/search/search.sock');
        expect(looked.output).not.toContain(canary);
        // grep found nothing: the last lines are the socket's folder.
        expect(looked.output).not.toMatch(/^\//m);
        // A provider's error page that echoes the request (the key in its URL) reaches the sandbox as a bare status.
        provider.failWith = 500;
        try {
          const failed = await exec(
            `python3 -c 'from a2rl_search import search
try:
    search("make it fail")
except Exception as error:
    print("ERR", error)'`,
          );
          expect(failed.output).toMatch(/ERR \[UNAVAILABLE\] The search provider failed \(serpapi answered HTTP 500\)/);
          expect(failed.output).not.toContain(canary);
          expect(provider.requests.at(-1)!.params.api_key).toBe(canary);
        } finally {
          provider.failWith = undefined;
        }
        // Nor does the run's record hold it: reports and exports show these events.
        const events = withStore(home, (store) => JSON.stringify(store.db.prepare('SELECT * FROM events WHERE run_id = ?').all(run.runId)));
        expect(events).toContain('make it fail');
        expect(events).not.toContain(canary);
      });
    });

    it('answers only POST /search with a well-formed query, refusing the rest without counting it or calling the provider', async () => {
      await attack('search-channel', 'hostile requests', backend, async () => {
        const before = (await call(run.client, 'budget_status')).structured.search_queries.used;
        const requests = provider.requests.length;
        const answers = JSON.parse((await exec('python3 code/probe.py hostile')).output.trim()) as Record<string, [number, string]>;
        expect(answers.get).toEqual([404, expect.stringMatching(/^\[NOT_FOUND\] The search channel answers only POST \/search/)]);
        expect(answers.other_path![0]).toBe(404);
        expect(answers.traversal![0]).toBe(404);
        expect(answers.huge).toEqual([413, expect.stringMatching(/^\[TOO_LARGE\] A search request is at most 8192 bytes/)]);
        expect(answers.not_json).toEqual([400, expect.stringMatching(/^\[INVALID_INPUT\] The search request is not JSON/)]);
        for (const name of ['top_k', 'extra_field', 'not_string'])
          expect(answers[name], name).toEqual([400, expect.stringMatching(/^\[INVALID_INPUT\] The search request must be/)]);
        expect(answers.empty).toEqual([400, '[INVALID_INPUT] The search query is empty; ask for something.']);
        expect(provider.requests).toHaveLength(requests);
        expect((await call(run.client, 'budget_status')).structured.search_queries.used).toBe(before);
      });
    });

    it('a burst of queries keeps at most 4 at the provider at once, and counts exactly those answered', async () => {
      await attack('search-channel', 'burst', backend, async () => {
        const before = (await call(run.client, 'budget_status')).structured.search_queries.used;
        provider.delayMs = 300;
        provider.mostAtOnce = 0;
        let answers: Array<[number, string]>;
        try {
          answers = JSON.parse((await exec('python3 code/probe.py burst')).output.trim());
        } finally {
          provider.delayMs = 0;
        }
        expect(answers).toHaveLength(12);
        for (const [status, error] of answers) {
          if (status !== 200)
            expect([status, error]).toEqual([429, expect.stringMatching(/^\[BUSY\] \d+ searches of this run are already waiting/)]);
        }
        expect(provider.mostAtOnce).toBeLessThanOrEqual(4);
        const answered = answers.filter(([status]) => status === 200).length;
        expect(answered).toBeGreaterThanOrEqual(4);
        expect((await call(run.client, 'budget_status')).structured.search_queries.used).toBe(before + answered);
      });
    });

    it("the socket's folder cannot be changed from the sandbox, and the socket is gone once the run ends", async () => {
      await attack('search-channel', 'replace the socket', backend, async () => {
        const tried = await exec('touch /run/a2rl/search/x 2>&1; rm -f /run/a2rl/search/search.sock 2>&1; ls /run/a2rl/search');
        expect(tried.output).toMatch(/Read-only file system/);
        expect(tried.output.trim().split('\n').at(-1)).toBe('search.sock');
        const socket = join(home, 'runs', run.runId, 'search', 'search.sock');
        expect(existsSync(socket)).toBe(true);
        await run.client.close();
        for (let tries = 0; tries < 100 && existsSync(socket); tries++) await new Promise((resolve) => setTimeout(resolve, 100));
        expect(existsSync(socket)).toBe(false);
      });
    });
  });
}

/**
 * Hammers a run's search socket from a process of its own (so that the test's loop, which times the other run's calls,
 * carries none of it): on "go", 4 requests at once (the channel's bound), each a new connection and a query nothing
 * has asked (ranked, never cached), printing "busy" once 4 are answered; on "pause", it stops asking and prints
 * "paused" once none is in flight; on "exit", it prints how many were answered.
 */
const hammer = String.raw`
const http = require('node:http');
const readline = require('node:readline');
const socketPath = process.argv[1];
let running = false, inFlight = 0, answered = 0, sinceGo = 0, next = 0, parked = [];
const post = (query) => new Promise((resolve) => {
  const body = JSON.stringify({ query, top_k: 3 });
  const request = http.request({ socketPath, path: '/search', method: 'POST', headers: { 'content-length': Buffer.byteLength(body) } }, (response) => {
    response.resume();
    response.on('end', () => resolve(response.statusCode));
  });
  request.on('error', () => resolve(0));
  request.end(body);
});
const lane = async () => {
  for (;;) {
    while (!running) await new Promise((resolve) => parked.push(resolve));
    inFlight++;
    const status = await post('w0 w1 w2 w3 w4 w5 w' + (6 + (next % 40)) + ' query ' + next++);
    inFlight--;
    if (status === 200 && (answered++, ++sinceGo === 4)) console.log('busy');
    if (!running && inFlight === 0) console.log('paused');
  }
};
for (let i = 0; i < 4; i++) void lane();
console.log('paused');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'go') {
    running = true;
    sinceGo = 0;
    for (const resume of parked.splice(0)) resume();
  } else if (line === 'pause') running = false;
  else if (line === 'exit') {
    console.log(JSON.stringify({ answered }));
    process.exit(0);
  }
});
`;

describe('local search runs off the server loop', () => {
  const home = tempDir('redteam-search-load');
  let server: HttpServer;
  let searcher: { run_id: string; token: string };
  let searcherClient: Client;
  let other: Client;

  beforeAll(async () => {
    // Every document holds most of the common words a hammering query asks, so each query scores most of the corpus
    // (a quarter of a second here): ranked on the server's loop, such queries held other runs' calls for seconds (issue 45).
    const corpus = join(home, 'corpus.jsonl');
    const lines: string[] = [];
    for (let doc = 0; doc < 40_000; doc++) {
      const words = Array.from({ length: 60 }, (_, i) => `w${(doc * 7 + i * 13) % 80}`);
      lines.push(JSON.stringify({ title: `document ${doc}`, text: words.join(' '), url: `https://example.org/${doc}` }));
    }
    writeFileSync(corpus, lines.join('\n'));
    server = await startHttpServer(home, 'bwrap', ['--search', 'local', '--search-corpus', corpus]);
    searcher = await createHttpRun(home, 'wall=30m,searches=1000000');
    const quiet = await createHttpRun(home, 'wall=30m');
    // Connecting serves the run, which opens its search channel.
    searcherClient = await connectHttp(server.url, searcher.token);
    await call(searcherClient, 'budget_status');
    other = await connectHttp(server.url, quiet.token);
  });
  afterAll(async () => {
    await searcherClient?.close();
    await other?.close();
    if (server) await killServer(server);
  });

  /** Milliseconds of each of `count` budget_status calls of the other run, one after another. */
  async function budgetStatusTimes(count: number): Promise<number[]> {
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      await call(other, 'budget_status');
      times.push(performance.now() - started);
    }
    return times;
  }

  it("a run hammering local search leaves another run's budget_status p99 within 1.5x of its quiet value", async () => {
    await attack('search-channel', 'local search load', 'bwrap', async () => {
      const socket = join(home, 'runs', searcher.run_id, 'search', 'search.sock');
      const child = spawn(process.execPath, ['-e', hammer, socket], { stdio: ['pipe', 'pipe', 'inherit'] });
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      const said = async (expected: string) => {
        const { value } = await lines.next();
        expect(value).toBe(expected);
      };
      await said('paused');
      await budgetStatusTimes(50); // warm-up: the client, the server's statements, the JIT
      const p99 = (times: number[]) => [...times].sort((a, b) => a - b)[Math.ceil(times.length * 0.99) - 1]!;
      /** One trial: quiet and hammered turns alternate, short, so that what else the machine does weighs on both alike. */
      const trial = async () => {
        const quiet: number[] = [];
        const hammered: number[] = [];
        for (let turn = 0; turn < 8; turn++) {
          quiet.push(...(await budgetStatusTimes(50)));
          child.stdin.write('go\n');
          await said('busy'); // the hammer is at work (its first answers are in) before the calls are timed
          hammered.push(...(await budgetStatusTimes(50)));
          child.stdin.write('pause\n');
          await said('paused');
        }
        return { quiet_p99_ms: p99(quiet), hammered_p99_ms: p99(hammered) };
      };
      // Up to three trials, one of which must hold: ranked on the server's loop, every hammered call waits behind a
      // quarter-second ranking in every trial, while a spike from the rest of a loaded machine spoils one trial's p99.
      const trials: { quiet_p99_ms: number; hammered_p99_ms: number }[] = [];
      const holds = (t: { quiet_p99_ms: number; hammered_p99_ms: number }) => t.hammered_p99_ms <= 1.5 * t.quiet_p99_ms;
      while (trials.length < 3 && !trials.some(holds)) trials.push(await trial());
      child.stdin.write('exit\n');
      const { answered } = JSON.parse((await lines.next()).value as string) as { answered: number };
      recordFigure({ kind: 'local_search_load', trials, searches_answered: answered });
      // At least the 4 waited for in each turn: the hammer was at work all along.
      expect(answered).toBeGreaterThanOrEqual(32 * trials.length);
      expect(trials.filter(holds), JSON.stringify(trials)).not.toHaveLength(0);
    });
  }, 300_000);
});
