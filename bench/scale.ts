import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { fork, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store } from '../src/store/store.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { viewToken } from '../src/view/token.js';
import { latencies, percentile, round } from './measure.js';
import type { PageLoad } from './page-loader.js';
import { cloneRuns, recordTemplateRuns } from './scale-store.js';
import { startHttpServer } from './serve.js';

/**
 * Issue 49's scale bench: stores of 10³, 10⁴ and 10⁵ runs (bench/scale-store.ts: template runs recorded through the
 * store's API, cloned row for row), and on each `runs list`, `leaderboard` (kept summaries, and at ≤ 10⁴ runs from
 * none), the runs page, the leaderboard page and a run page (first byte, size), and a live run's `budget_status` p99
 * while those pages and 10 run pages load against none (slices alternate, so load from elsewhere falls on both), and
 * while the first leaderboard page of a store upgraded without summaries writes them all from the view worker.
 * Then a run of 10⁶ tool calls: `runs export` and `report --format json`, peak RSS. Every time has its floor measured
 * in the same run (a CLI that does nothing: `a2rl --version`). Pages are loaded by a browser's stand-in, a process
 * of its own under SCHED_IDLE (bench/page-loader.ts): a real browser is another process, usually on another machine, and
 * reading pages in the timed client's own event loop would charge the client's work to the server. The server's work
 * (its thread passing the view's bytes, the view process rendering) all stays on this machine's cores, measured.
 * `node dist/bench/scale.js [sizes…] [--calls N]` (sizes default to 10³ 10⁴ 10⁵; --calls 0 skips the long run);
 * writes bench/scale-results.json after each measurement.
 */

const args = process.argv.slice(2);
const callsAt = args.indexOf('--calls');
const longRunCalls = callsAt >= 0 ? Number(args[callsAt + 1]) : 1_000_000;
const sizes = (callsAt >= 0 ? [...args.slice(0, callsAt), ...args.slice(callsAt + 2)] : args).map(Number);
if (![longRunCalls, ...sizes].every((n) => Number.isInteger(n) && n >= 0)) {
  throw new Error(`usage: node dist/bench/scale.js [runs…] [--calls N]: sizes and calls are whole numbers (got ${args.join(' ')})`);
}

function cliTime(home: string, cliArgs: string[]): { ms: number; bytes: number; max_rss_mib: number } {
  const start = performance.now();
  const result = spawnSync('/usr/bin/time', ['-f', '%M', process.execPath, cliEntry, '--home', home, ...cliArgs], {
    maxBuffer: 2 ** 31,
    encoding: 'buffer',
  });
  const ms = performance.now() - start;
  if (result.status !== 0) throw new Error(`a2rl ${cliArgs.join(' ')} failed: ${result.stderr.toString().slice(-2000)}`);
  const kib = Number(/(\d+)\s*$/.exec(result.stderr.toString())?.[1] ?? NaN);
  return { ms: round(ms), bytes: result.stdout.length, max_rss_mib: round(kib / 1024, 1) };
}

async function liveClient(url: string, adminToken: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const response = await fetch(`${url}/runs`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ task: 'micro-gsm8k', label: 'scale-bench' }),
  });
  if (response.status !== 201) throw new Error(`POST /runs answered ${response.status}: ${await response.text()}`);
  const { token } = (await response.json()) as { token: string };
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'a2rl-scale-bench', version: '1' });
  await client.connect(transport);
  return { client, transport };
}

/**
 * A browser (bench/page-loader.ts, a process of its own) loading `paths` at once, again and again until `stop` when
 * `loop`: how many pages it loaded, and the last round's figures of each.
 */
function browse(
  base: string,
  token: string,
  paths: string[],
  loop: boolean,
): { done: Promise<{ loads: number; pages: Record<string, PageLoad> }>; stop: () => void } {
  const child = fork(join(dirname(fileURLToPath(import.meta.url)), 'page-loader.js'), { stdio: 'inherit' });
  const done = new Promise<{ loads: number; pages: Record<string, PageLoad> }>((resolve, reject) => {
    child.once('message', (answer: { loads: number; pages: Record<string, PageLoad> } | { error: string }) =>
      'error' in answer ? reject(new Error(answer.error)) : resolve(answer),
    );
    child.once('exit', (code) => reject(new Error(`the page loader exited (${code}) before it answered`)));
  });
  child.send({ base, token, paths, loop });
  return { done, stop: () => child.connected && child.send('stop') };
}

/** One page loaded alone: its first byte, whole answer and size. */
async function loadPage(base: string, path: string, token: string): Promise<PageLoad> {
  return (await browse(base, token, [path], false).done).pages[path]!;
}

async function budgetStatusFor(client: Client, ms: number): Promise<number[]> {
  const times: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const start = performance.now();
    await client.callTool({ name: 'budget_status', arguments: {} });
    times.push(performance.now() - start);
  }
  return times;
}

async function atSize(runs: number) {
  const home = mkdtempSync(join(tmpdir(), `a2rl-scale-${runs}-`));
  try {
    const store = new Store(join(home, 'store.sqlite'));
    let start = performance.now();
    cloneRuns(store, recordTemplateRuns(store, home), runs);
    const buildS = (performance.now() - start) / 1000;
    store.close();
    const floor = cliTime(home, ['--version']);
    const runsList = cliTime(home, ['runs', 'list']);
    const runsListAll = cliTime(home, ['runs', 'list', '--all']);
    const leaderboard = cliTime(home, ['leaderboard', '--json']);
    let cold: ReturnType<typeof cliTime> | undefined;
    if (runs <= 10_000) {
      const again = new Store(join(home, 'store.sqlite'));
      again.db.exec('DELETE FROM run_summaries');
      again.close();
      cold = cliTime(home, ['leaderboard', '--json']);
    }
    const adminToken = randomBytes(16).toString('hex');
    const server = await startHttpServer(home, adminToken);
    const token = viewToken(home);
    try {
      const { client, transport } = await liveClient(server.url, adminToken);
      for (let i = 0; i < 50; i++) await client.callTool({ name: 'budget_status', arguments: {} });
      const pages = {
        runs_page: await loadPage(server.url, '/view', token),
        runs_page_filtered: await loadPage(server.url, '/view?agent=agent-1&state=ended', token),
        leaderboard_page: await loadPage(server.url, '/view/leaderboard', token),
        run_page: await loadPage(server.url, `/view/runs/clone-${Math.floor(runs / 2)}`, token),
      };
      const paths = [
        '/view',
        '/view/leaderboard',
        ...Array.from({ length: 10 }, (_, i) => `/view/runs/clone-${i * Math.floor(runs / 10) + 8}`),
      ];
      const quiet: number[] = [];
      const loaded: number[] = [];
      const spinning: number[] = [];
      let pageLoads = 0;
      // 12 slices of 2.5 s each way: a p99 of about 10,000 calls, steadier than of 5,000 from run to run. The floor:
      // a process at the view's priority spinning on a core, which pages cannot cost less than on a machine whose
      // every busy core slows the others (shared caches, clocks).
      for (let slice = 0; slice < 12; slice++) {
        quiet.push(...(await budgetStatusFor(client, 2500)));
        const browser = browse(server.url, token, paths, true);
        loaded.push(...(await budgetStatusFor(client, 2500)));
        browser.stop();
        pageLoads += (await browser.done).loads;
        const spinner = spawn(process.execPath, ['-e', 'require("os").setPriority(19); for (;;);'], { stdio: 'ignore' });
        spinning.push(...(await budgetStatusFor(client, 2500)));
        // Gone before the next quiet slice starts.
        const gone = once(spinner, 'exit');
        spinner.kill('SIGKILL');
        await gone;
      }
      // An upgraded store: no summary kept, so the first leaderboard page writes every run's from the view worker
      // (500 a transaction) while the live run's calls are timed. The generation moves as a real write's would.
      const upgraded = new Store(join(home, 'store.sqlite'));
      upgraded.db.exec('DELETE FROM run_summaries; UPDATE summaries_generation SET n = n + 1');
      upgraded.close();
      let summarising = true;
      const firstBoard = loadPage(server.url, '/view/leaderboard', token).finally(() => (summarising = false));
      const whileSummarising: number[] = [];
      while (summarising) whileSummarising.push(...(await budgetStatusFor(client, 250)));
      const summarised = { leaderboard_page: await firstBoard, budget_status: latencies(whileSummarising) };
      await transport.terminateSession();
      await client.close();
      const none = latencies(quiet);
      const withPages = latencies(loaded);
      const spun = latencies(spinning);
      return {
        runs,
        build_s: round(buildS, 1),
        floor_cli_ms: floor.ms,
        runs_list: { ...runsList, over_floor: round(runsList.ms / floor.ms) },
        runs_list_all: { ...runsListAll, over_floor: round(runsListAll.ms / floor.ms) },
        leaderboard_cli: { ...leaderboard, over_floor: round(leaderboard.ms / floor.ms) },
        ...(cold ? { leaderboard_cli_no_summaries_kept: cold } : {}),
        pages,
        budget_status: {
          no_pages: none,
          pages_loading: { ...withPages, page_loads: pageLoads },
          p99_ratio: round(withPages.p99_ms / none.p99_ms),
          one_core_spinning_at_nice_19: { ...spun, p99_ratio: round(spun.p99_ms / none.p99_ms) },
          p99_ratio_over_spinning: round(withPages.p99_ms / spun.p99_ms),
          p999_ms_pages_loading: round(
            percentile(
              [...loaded].sort((a, b) => a - b),
              99.9,
            ),
            3,
          ),
        },
        upgraded_store_first_leaderboard: summarised,
      };
    } finally {
      server.child.kill('SIGTERM');
      await once(server.child, 'exit');
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** A run of `calls` tool calls (the template's call size), exported and reported: time and peak RSS of each. */
function longRun(calls: number) {
  const home = mkdtempSync(join(tmpdir(), 'a2rl-scale-long-'));
  try {
    const store = new Store(join(home, 'store.sqlite'));
    const [id] = recordTemplateRuns(store, home);
    const insert = store.db.prepare(
      `INSERT INTO events (run_id, at, t_rel_ms, kind, name, data) VALUES (?, ?, ?, 'tool', 'budget_status', ?)`,
    );
    const data = JSON.stringify({ arguments: {}, result: { state: 'running', note: 'x'.repeat(400) }, duration_ms: 3 });
    const batch = store.db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) insert.run(id, i, i, data);
    });
    for (let from = 0; from < calls; from += 100_000) batch(from, Math.min(calls, from + 100_000));
    store.close();
    const attempt = (cliArgs: string[]) => {
      try {
        return cliTime(home, cliArgs);
      } catch (error) {
        return { failed: (error as Error).message.slice(-300) };
      }
    };
    return {
      calls,
      export: attempt(['runs', 'export', id!, '--out', join(home, 'export')]),
      report_json: attempt(['report', id!, '--format', 'json', '--out', join(home, 'report.json')]),
      target_max_rss_mib: 512,
    };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

const results: Record<string, unknown> = {
  machine: {
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? 'unknown',
    memory_gib: round(totalmem() / 2 ** 30, 1),
    node: process.version,
  },
  load_average_1m_before: round(loadavg()[0]!),
  page_loaders:
    'a separate process under SCHED_IDLE (bench/page-loader.ts), standing in for a browser on another machine; the server and its view process on this one',
  stores: [] as unknown[],
};
/** Written after each measurement: a size that fails keeps what the others measured. */
const save = () => {
  results.load_average_1m_after = round(loadavg()[0]!);
  results.measured_at = new Date().toISOString();
  writeFileSync(join(packageRoot, 'bench', 'scale-results.json'), `${JSON.stringify(results, null, 2)}\n`);
};
if (longRunCalls > 0) {
  results.long_run = longRun(longRunCalls);
  save();
}
for (const runs of sizes.length > 0 ? sizes : [1000, 10_000, 100_000]) {
  try {
    (results.stores as unknown[]).push(await atSize(runs));
  } catch (error) {
    (results.stores as unknown[]).push({ runs, failed: String(error) });
  }
  process.stderr.write(`scale: ${runs} runs measured\n`);
  save();
}
process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
