import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { connectStdio } from '../src/launch/client.js';
import { packageRoot } from '../src/util/paths.js';
import { baselineGraded, latencies, round } from './measure.js';

/** One search round trip over HTTP, a new connection each time as the sandbox's client makes it: ms to the whole answer. */
function roundTrip(target: { socketPath: string } | { url: URL }, query: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ query, top_k: 3 });
    const options =
      'socketPath' in target
        ? { socketPath: target.socketPath, path: '/search', method: 'POST', headers: { 'content-length': Buffer.byteLength(body) } }
        : {
            host: target.url.hostname,
            port: target.url.port,
            path: `${target.url.pathname}?q=${encodeURIComponent(query)}&num=3`,
            method: 'GET',
          };
    const req = request({ ...options, agent: false }, (response) => {
      response.resume();
      response.once('end', () =>
        response.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`HTTP ${response.statusCode}`)),
      );
    });
    req.once('error', reject);
    req.end('socketPath' in target ? body : undefined);
  });
}

/**
 * A search call's round trip through a2rl's server, answered from the query cache, against a direct call of the same
 * provider (a SerpAPI double on loopback, in a process of its own): the sandbox's path (HTTP over the run's Unix
 * socket: the channel checks the budget, reads the cache, commits the `search/query` event) and the one it replaces.
 * In alternating blocks of `blockCalls`, so load from elsewhere falls on both.
 */
export async function searchRoundTrip(home: string, blocks: number, blockCalls: number) {
  const provider = spawn(process.execPath, [join(packageRoot, 'dist', 'bench', 'fake-provider.js')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = new URL(
    await new Promise<string>((resolve, reject) => {
      provider.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString().trim()));
      provider.once('exit', () => reject(new Error('the fake provider exited')));
    }),
  );
  // SerpAPI needs a key; the double takes any. The server inherits it from this process's environment.
  process.env.A2RL_BENCH_SEARCH_KEY = 'bench-key';
  const { client } = await connectStdio({
    task: 'micro-gsm8k',
    home,
    budget: `searches=${blocks * blockCalls + 1000}`,
    stderr: 'ignore',
    clientName: 'a2rl-bench',
    serverArgs: ['--search', 'serpapi', '--search-url', url.href, '--search-key-env', 'A2RL_BENCH_SEARCH_KEY'],
  });
  try {
    const status = await client.callTool({ name: 'budget_status', arguments: {} });
    const runId = (status.structuredContent as { run_id: string }).run_id;
    const channel = { socketPath: join(home, 'runs', runId, 'search', 'search.sock') };
    const direct = { url };
    await baselineGraded(client);
    const query = 'who wrote the brothers karamazov';
    await roundTrip(channel, query); // the miss that fills the cache
    const times = { channel: [] as number[], direct: [] as number[] };
    // Steady state on every side first: V8 compiles the hot paths of the server, the provider and this client.
    for (let i = 0; i < 500; i++) {
      await roundTrip(channel, query);
      await roundTrip(direct, query);
    }
    for (let b = 0; b < blocks; b++) {
      for (let i = 0; i < blockCalls; i++) times.channel.push(await roundTrip(channel, query));
      for (let i = 0; i < blockCalls; i++) times.direct.push(await roundTrip(direct, query));
    }
    const [through, straight] = [latencies(times.channel), latencies(times.direct)];
    const load = round(loadavg()[0]!, 3);
    return {
      through_server_cache_hit: through,
      direct_provider_call: straight,
      ratio_p50: round(through.p50_ms / straight.p50_ms, 3),
      ratio_p99: round(through.p99_ms / straight.p99_ms, 3),
      load_1min_after: load,
      note: 'each call a new HTTP connection, as the sandbox client makes it; the provider a SerpAPI double on loopback in its own process',
    };
  } finally {
    await client.close();
    provider.kill();
  }
}
