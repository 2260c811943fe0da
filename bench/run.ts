/**
 * Reproducible benchmarks of the server: `npm run bench` prints them as JSON and records
 * them, with the machine they ran on, in bench/results.json. `npm run bench -- SECTION...`
 * measures only the sections named (keys of the results) and keeps the others as recorded.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { BubblewrapBackend, systemArgs } from '../sandbox/bwrap.js';
import { DockerBackend } from '../sandbox/docker.js';
import { SlurmBackend } from '../sandbox/slurm.js';
import { startLocalSlurm } from '../test/helpers/slurm.js';
import { processStartTime } from '../sandbox/process-tree.js';
import type { SandboxBackend, SandboxInstance, SandboxSpec } from '../sandbox/contract.js';
import { connectStdio } from '../src/launch/client.js';
import { Grader } from '../src/grading/grader.js';
import { JobManager } from '../src/jobs/job-manager.js';
import { RubricJudge } from '../src/grading/judge/rubric.js';
import { createLogger } from '../src/util/logger.js';
import { packageRoot } from '../src/util/paths.js';
import { Store } from '../src/store/store.js';
import { getTask, listTaskIds } from '../src/tasks/task.js';
import { executePrograms } from '../src/grading/execution.js';
import { analyzeRun, loadRunFacts } from '../src/reports/analysis.js';
import { buildLeaderboard, runResults } from '../src/reports/leaderboard.js';
import { viewToken } from '../src/view/token.js';
import { searchRoundTrip } from './search.js';
import { contaminationCheckCost } from './contamination.js';
import { baselineGraded, latencies, percentile, round } from './measure.js';
import { recordGrade, startHttpServer, unlimitedCalls } from './serve.js';

/** Named as a server names itself, so a server starting meanwhile does not sweep the bench's sandboxes as a dead one's. */
const benchOwner = `${process.pid}-${processStartTime(process.pid)}`;
/** The bench measures the server's overhead, not its per-run call rate limit: its servers lift it. */

const bareServerEntry = join(packageRoot, 'dist', 'bench', 'bare-server.js');

/** Latencies of `calls` budget_status calls made one after another, in ms. */
async function budgetStatusTimes(client: Client, calls: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    await client.callTool({ name: 'budget_status', arguments: {} });
    times.push(performance.now() - start);
  }
  return times;
}

/**
 * A stdio server's latencies, and how many of its calls stalled over 1 ms: that share, not the server's own work,
 * decides where its p99 falls on the bench host (docs/ARCHITECTURE.md, "bench").
 */
function stdioLatencies(times: number[]) {
  return { ...latencies(times), calls_over_1ms: times.filter((ms) => ms > 1).length };
}

/** Calls to each stdio server between switches to the next. */
const stdioBlockCalls = 1000;

/**
 * budget_status over stdio against its two floors, a bare SDK server with one tool (bench/bare-server.ts) and the
 * same server committing each call's event, same client: the servers are called in turn, `blocks` blocks of
 * {@link stdioBlockCalls} calls each, so load from elsewhere falls on all three.
 */
async function budgetStatusRoundTrip(home: string, blocks: number) {
  const { client } = await connectStdio({
    task: 'micro-gsm8k',
    home,
    stderr: 'ignore',
    clientName: 'a2rl-bench',
    serverArgs: unlimitedCalls,
  });
  const bare = new Client({ name: 'a2rl-bench', version: '1' });
  await bare.connect(new StdioClientTransport({ command: process.execPath, args: [bareServerEntry, 'stdio'], stderr: 'ignore' }));
  // The bare server again, committing each call's event before answering: the price of invariant 5 alone, on this machine.
  const committing = new Client({ name: 'a2rl-bench', version: '1' });
  await committing.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [bareServerEntry, 'stdio', join(home, 'bare-events.sqlite')],
      stderr: 'ignore',
    }),
  );
  try {
    await baselineGraded(client);
    const servers = { a2rl: client, bare, committing };
    const times = { a2rl: [] as number[], bare: [] as number[], committing: [] as number[] };
    // Steady state on every side: a few thousand calls let V8 compile the hot paths first.
    for (const server of Object.values(servers)) await budgetStatusTimes(server, 2000);
    for (let b = 0; b < blocks; b++) {
      for (const [name, server] of Object.entries(servers))
        times[name as keyof typeof times].push(...(await budgetStatusTimes(server, stdioBlockCalls)));
    }
    const [mine, bareFigures, committingFigures] = [
      stdioLatencies(times.a2rl),
      stdioLatencies(times.bare),
      stdioLatencies(times.committing),
    ];
    return {
      a2rl: mine,
      bare_sdk: bareFigures,
      bare_sdk_committing_each_call: committingFigures,
      p50_ratio: round(mine.p50_ms / bareFigures.p50_ms),
      p99_ratio: round(mine.p99_ms / bareFigures.p99_ms),
      p50_ratio_to_committing: round(mine.p50_ms / committingFigures.p50_ms),
      p99_ratio_to_committing: round(mine.p99_ms / committingFigures.p99_ms),
      targets: { p50_ratio: 1.3, p99_ratio: 1.5 },
    };
  } finally {
    await client.close();
    await bare.close();
    await committing.close();
  }
}

const benchSpec = (workspace: string): SandboxSpec => ({
  name: 'bench',
  mounts: [{ source: workspace, target: '/workspace', readOnly: false }],
  hidden: [],
  env: {},
  workdir: '/workspace',
  limits: { cpus: 1, memoryBytes: 1024 * 2 ** 20, pids: 256 },
});

/** Job start overhead: `true` run as a job, from exec to its exit status. */
async function sandboxStart(backend: SandboxBackend, runs: number) {
  const sandbox = await backend.create(benchSpec(mkdtempSync(join(tmpdir(), 'a2rl-bench-ws-'))));
  try {
    return latencies(await execTrue(sandbox, runs));
  } finally {
    await sandbox.destroy();
  }
}

/**
 * bubblewrap's job start against its floor: `bwrap --unshare-all` with the same system
 * mounts (`systemArgs`), /proc, /dev, /tmp and workspace, running `true` straight from this
 * process (no cgroup, no accounting, no log file), alternating with the sandbox's own exec.
 * Each start comes after a pause, as jobs do: after a quiet spell the kernel may make a move
 * into a cgroup wait for an RCU grace period (sandbox/cgroup.ts), which back-to-back starts hide.
 */
async function bubblewrapStart(runs: number) {
  const workspace = mkdtempSync(join(tmpdir(), 'a2rl-bench-ws-'));
  const sandbox = await new BubblewrapBackend(benchOwner).create(benchSpec(workspace));
  const raw = ['--unshare-all', '--die-with-parent', ...systemArgs(), '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp'];
  raw.push('--bind', workspace, '/workspace', '--chdir', '/workspace', '--', 'true');
  const floor: number[] = [];
  const mine: number[] = [];
  try {
    const pause = () => new Promise((resolve) => setTimeout(resolve, 50));
    for (let i = 0; i < runs; i++) {
      await pause();
      const start = performance.now();
      const code = await new Promise((resolve) => spawn('bwrap', raw, { stdio: 'ignore' }).once('close', resolve));
      floor.push(performance.now() - start);
      if (code !== 0) throw new Error(`bwrap ... true exited with ${code}`);
      await pause();
      mine.push(...(await execTrue(sandbox, 1, `bench-${i}`)));
    }
  } finally {
    await sandbox.destroy();
  }
  const [a2rl, bare] = [latencies(mine), latencies(floor)];
  return { a2rl, raw_bwrap: bare, p50_ratio: round(a2rl.p50_ms / bare.p50_ms), target: { p50_ratio: 1.5 } };
}

/** A run's sandbox made ready (Docker: its container created and started), and removed again. */
async function sandboxCreation(backend: SandboxBackend, runs: number) {
  const create: number[] = [];
  const destroy: number[] = [];
  for (let i = 0; i < runs; i++) {
    const spec = benchSpec(mkdtempSync(join(tmpdir(), 'a2rl-bench-ws-')));
    let start = performance.now();
    const sandbox = await backend.create(spec);
    create.push(performance.now() - start);
    start = performance.now();
    await sandbox.destroy();
    destroy.push(performance.now() - start);
  }
  create.sort((a, b) => a - b);
  destroy.sort((a, b) => a - b);
  return {
    runs,
    create_p50_ms: round(percentile(create, 50)),
    create_max_ms: round(create.at(-1)!),
    destroy_p50_ms: round(percentile(destroy, 50)),
  };
}

async function execTrue(sandbox: SandboxInstance, runs: number, tag = 'bench'): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const job = sandbox.exec({
      command: ['true'],
      limits: { cpus: 1, memoryBytes: 256 * 2 ** 20, pids: 16, gpus: [] },
      output: { write: () => undefined },
      tag: `${tag}-${i}`,
    });
    const status = await job.exited;
    times.push(performance.now() - start);
    if (status.exitCode !== 0) throw new Error(`true exited with ${status.exitCode}`);
  }
  return times;
}

/** Grading of each task's base model from scratch: phase one and, by kind, execution or judging. */
async function gradingThroughput(home: string, taskId: string) {
  const task = getTask(taskId);
  const store = new Store(join(home, `grading-${taskId}.sqlite`));
  const { logger } = createLogger();
  logger.level = 'warn';
  const backend = new BubblewrapBackend(benchOwner);
  const jobs = new JobManager(store, logger, benchOwner);
  const grader = new Grader(store, jobs, backend, new RubricJudge(backend, join(home, 'judging')), join(home, 'grading'), logger, 1);
  const runDir = join(home, `bench-run-${taskId}`);
  store.insertRun({
    id: 'bench',
    task_id: task.id,
    label: null,
    budget: '{}',
    dir: runDir,
    sandbox: 'bwrap',
    grader_version: grader.version(task),
    owner: 'bench',
    created_at: Date.now(),
  });
  const items = ['public.jsonl', 'private.jsonl']
    .map((file) => readFileSync(join(task.paths.evalData, file), 'utf8').trim().split('\n').length)
    .reduce((a, b) => a + b, 0);
  const start = performance.now();
  const grade = await grader.grade({
    task,
    contentHash: task.baseModelHash,
    checkpointDir: task.paths.baseModel,
    runId: 'bench',
    runDir,
    record: () => undefined,
  });
  const seconds = (performance.now() - start) / 1000;
  store.close();
  return { items, seconds: round(seconds), items_per_second: round(items / seconds, 1), baseline_public: grade.public_score };
}

/** What running one model-written program in a sandbox of its own costs. */
async function programSandboxOverhead(home: string, programs: number) {
  const task = getTask('micro-humaneval');
  const items = Array.from({ length: programs }, (_, i) => ({
    id: String(i),
    split: 'public' as const,
    program: 'def f(x):\n    return x + 1\n',
    entry_point: 'f',
    calls: [[1], [2], [3], [4], [5]],
    expected: [2, 3, 4, 5, 6],
  }));
  const start = performance.now();
  const results = await executePrograms(new BubblewrapBackend(benchOwner), task, items, join(home, 'programs'));
  const seconds = (performance.now() - start) / 1000;
  if (results.some((r) => r.passed !== 5)) throw new Error('a trivial program failed its tests');
  return {
    programs,
    concurrency: task.grader.execution!.concurrency,
    seconds: round(seconds),
    ms_per_program: round((1000 * seconds) / programs, 1),
  };
}

async function createHttpRun(url: string, adminToken: string): Promise<string> {
  const response = await fetch(`${url}/runs`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ task: 'micro-gsm8k', label: 'bench' }),
  });
  if (response.status !== 201) throw new Error(`POST /runs answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { token: string }).token;
}

async function connectHttp(url: string, token: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'a2rl-bench', version: '1' });
  await client.connect(transport);
  return { client, transport };
}

/** Ends sessions the way a polite client does (DELETE), so the server holds none of them afterwards. */
async function closeSessions(sessions: Array<{ client: Client; transport: StreamableHTTPClientTransport }>): Promise<void> {
  await Promise.all(sessions.map(async ({ client, transport }) => (await transport.terminateSession(), await client.close())));
}

function residentBytes(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!kib) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kib[1]) * 1024;
}

/** Every client calls budget_status `callsPerSession` times in a row, all clients at once. */
async function concurrentBudgetStatus(clients: Client[], callsPerSession: number) {
  const times: number[] = [];
  const start = performance.now();
  await Promise.all(
    clients.map(async (client) => {
      for (let i = 0; i < callsPerSession; i++) {
        const callStart = performance.now();
        await client.callTool({ name: 'budget_status', arguments: {} });
        times.push(performance.now() - callStart);
      }
    }),
  );
  return { times, seconds: (performance.now() - start) / 1000 };
}

/** Every client calls budget_status in a row until `seconds` have passed, all clients at once. */
async function budgetStatusFor(clients: Client[], seconds: number) {
  const times: number[] = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < end) {
        const callStart = performance.now();
        await client.callTool({ name: 'budget_status', arguments: {} });
        times.push(performance.now() - callStart);
      }
    }),
  );
  return { times, seconds: (performance.now() - start) / 1000 };
}

function loadFigures({ times, seconds }: { times: number[]; seconds: number }, sessions: number) {
  return { sessions, ...latencies(times), calls_per_second: round(times.length / seconds, 1) };
}

/** The bare SDK Streamable HTTP server (bench/bare-server.ts) on a free loopback port. */
async function startBareHttpServer(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [bareServerEntry, 'http'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const url = await new Promise<string>((resolve, reject) => {
    let stderr = '';
    child.once('exit', (code) => reject(new Error(`bench/bare-server.js http exited with ${code}: ${stderr}`)));
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(stderr);
      if (match) resolve(match[1]!);
    });
  });
  return { child, url };
}

async function stopChild(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/**
 * One `serve --http` process with 32 runs, against its floor, the bare SDK Streamable HTTP
 * server: 32 sessions (one per run) call budget_status for `loadSeconds` on each, in
 * alternating halves so that load from elsewhere falls on both. Also one session alone, and
 * the server's resident memory per idle session.
 */
async function httpServing(home: string, idleSessions: number, loadSeconds: number) {
  const adminToken = randomBytes(16).toString('hex');
  const server = await startHttpServer(join(home, 'http'), adminToken);
  const bareServer = await startBareHttpServer();
  try {
    const tokens: string[] = [];
    for (let i = 0; i < 32; i++) tokens.push(await createHttpRun(server.url, adminToken));
    const sessions = await Promise.all(tokens.map((token) => connectHttp(server.url, token)));
    const bareSessions = await Promise.all(tokens.map(() => connectHttp(bareServer.url, 'none')));
    const clients = sessions.map((session) => session.client);
    const bareClients = bareSessions.map((session) => session.client);
    // The baseline grading every run starts would share the CPUs with the measurement: let it finish first.
    await baselineGraded(clients[0]!);
    // Idle sessions first: after the load below, V8 heap it freed would absorb them unseen.
    const rssBefore = residentBytes(server.child.pid!);
    const idle = await Promise.all(Array.from({ length: idleSessions }, (_, i) => connectHttp(server.url, tokens[i % tokens.length]!)));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const rssAfter = residentBytes(server.child.pid!);
    await closeSessions(idle);
    for (const client of [...clients, ...bareClients])
      for (let i = 0; i < 10; i++) await client.callTool({ name: 'budget_status', arguments: {} });
    const single = loadFigures(await concurrentBudgetStatus(clients.slice(0, 1), 1000), 1);
    const bareSingle = loadFigures(await concurrentBudgetStatus(bareClients.slice(0, 1), 1000), 1);
    const loaded = { times: [] as number[], seconds: 0 };
    const bareLoaded = { times: [] as number[], seconds: 0 };
    for (let half = 0; half < 2; half++) {
      for (const [into, from] of [
        [loaded, clients],
        [bareLoaded, bareClients],
      ] as const) {
        const { times, seconds } = await budgetStatusFor(from, loadSeconds / 2);
        into.times.push(...times);
        into.seconds += seconds;
      }
    }
    await closeSessions(sessions);
    await closeSessions(bareSessions);
    const mine = loadFigures(loaded, 32);
    const bare = loadFigures(bareLoaded, 32);
    return {
      budget_status_streamable: {
        sessions_1: { a2rl: single, bare_sdk: bareSingle },
        sessions_32: {
          seconds_each: loadSeconds,
          a2rl: mine,
          bare_sdk: bare,
          throughput_ratio: round(mine.calls_per_second / bare.calls_per_second),
          p99_ratio: round(mine.p99_ms / bare.p99_ms),
          targets: { throughput_ratio: 0.85, p99_ratio: 1.3 },
        },
      },
      idle_sessions: {
        sessions: idleSessions,
        server_rss_before_mib: round(rssBefore / 2 ** 20, 1),
        server_rss_after_mib: round(rssAfter / 2 ** 20, 1),
        kib_per_session: round((rssAfter - rssBefore) / 1024 / idleSessions, 1),
      },
    };
  } finally {
    await stopChild(server.child);
    await stopChild(bareServer.child);
  }
}

/** `calls` budget_status calls in a row on each client, all clients at once: each client's sorted latencies. */
async function budgetStatusLatencies(clients: Client[], calls: number): Promise<number[][]> {
  return Promise.all(
    clients.map(async (client) => {
      const times: number[] = [];
      for (let i = 0; i < calls; i++) {
        const start = performance.now();
        await client.callTool({ name: 'budget_status', arguments: {} });
        times.push(performance.now() - start);
      }
      return times.sort((a, b) => a - b);
    }),
  );
}

/**
 * One run's workspace given `files` files by one exec, as an agent would: that run's
 * budget_status p50 against its own with an empty workspace, and another run's p99 over
 * the same HTTP server with and without the big workspace (both runs calling at once).
 */
async function manyFilesWorkspace(home: string, files: number, calls: number) {
  const adminToken = randomBytes(16).toString('hex');
  const server = await startHttpServer(join(home, 'many-files'), adminToken);
  try {
    const sessions = [await connectHttp(server.url, await createHttpRun(server.url, adminToken))];
    sessions.push(await connectHttp(server.url, await createHttpRun(server.url, adminToken)));
    const [big, other] = sessions.map((s) => s.client) as [Client, Client];
    await baselineGraded(big);
    await baselineGraded(other);
    const [bigEmpty, otherWithout] = await budgetStatusLatencies([big, other], calls);
    const usedNow = async () =>
      ((await big.callTool({ name: 'budget_status', arguments: {} })).structuredContent as { disk_bytes: { used: number } }).disk_bytes
        .used;
    const emptyUsed = await usedNow();
    const made = await big.callTool({
      name: 'exec',
      arguments: {
        command: `python3 -c "import os; os.makedirs('output/many'); [open(f'output/many/{i}', 'w').write('x') for i in range(${files})]"`,
      },
    });
    if ((made.structuredContent as { exit_code?: number }).exit_code !== 0)
      throw new Error(`making the files failed: ${JSON.stringify(made)}`);
    // The disk account has walked the new tree (a block per file) before the measurement.
    for (let tries = 0; (await usedNow()) < emptyUsed + files * 2048; tries++) {
      if (tries > 300) throw new Error('the disk account never counted the new files');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const [bigFull, otherWith] = await budgetStatusLatencies([big, other], calls);
    await closeSessions(sessions);
    const p50 = (sorted: number[]) => percentile(sorted, 50);
    const p99 = (sorted: number[]) => percentile(sorted, 99);
    return {
      files,
      calls_per_run: calls,
      // The host's load while it ran: on a shared machine both sides of each ratio share it.
      load_average_1m: round(loadavg()[0]!),
      big_run_p50_ms: { empty: round(p50(bigEmpty!)), full: round(p50(bigFull!)), ratio: round(p50(bigFull!) / p50(bigEmpty!)) },
      other_run_p99_ms: {
        without: round(p99(otherWithout!)),
        with: round(p99(otherWith!)),
        ratio: round(p99(otherWith!) / p99(otherWithout!)),
      },
      targets: { big_run_p50_ratio: 2, other_run_p99_ratio: 1.5 },
    };
  } finally {
    const exited = new Promise((resolve) => server.child.once('exit', resolve));
    server.child.kill('SIGTERM');
    await exited;
  }
}

/** A local two-node Slurm cluster for one section (test/helpers/slurm.ts): its start time, and what the section measured on it. */
async function onLocalSlurm<T>(measure: () => Promise<T>): Promise<T & { cluster_start_s: number }> {
  const cluster = await startLocalSlurm();
  process.env.SLURM_CONF = cluster.conf;
  try {
    return { ...(await measure()), cluster_start_s: round(cluster.startSeconds) };
  } finally {
    await cluster.stop();
  }
}

/**
 * Many runs at once on the Slurm backend: one `serve --http --sandbox slurm`, `runs` agents
 * each calling exec (a Slurm job) and budget_status in a loop for `seconds`. What the head
 * node holds: events written per second, store growth, file descriptors and memory of the
 * server (docs/scaling.md extrapolates them to 1,000 runs).
 */
async function slurmLoad(home: string, runs: number, seconds: number) {
  const adminToken = randomBytes(16).toString('hex');
  const serverHome = join(home, 'slurm-load');
  const server = await startHttpServer(serverHome, adminToken, ['--sandbox', 'slurm', '--shared-root', tmpdir()]);
  const fds = () => readdirSync(`/proc/${server.child.pid}/fd`).length;
  const storeBytes = () =>
    ['store.sqlite', 'store.sqlite-wal'].reduce(
      (sum, file) => sum + (statSync(join(serverHome, file), { throwIfNoEntry: false })?.size ?? 0),
      0,
    );
  const eventCount = () => {
    const store = new Store(join(serverHome, 'store.sqlite'));
    try {
      return (store.db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n;
    } finally {
      store.close();
    }
  };
  try {
    const tokens: string[] = [];
    for (let i = 0; i < runs; i++) tokens.push(await createHttpRun(server.url, adminToken));
    const sessions = await Promise.all(tokens.map((token) => connectHttp(server.url, token)));
    const idleFds = fds();
    const [events0, bytes0] = [eventCount(), storeBytes()];
    let jobs = 0;
    let peakFds = idleFds;
    const execTimes: number[] = [];
    const deadline = Date.now() + seconds * 1000;
    const watch = setInterval(() => (peakFds = Math.max(peakFds, fds())), 500);
    await Promise.all(
      sessions.map(async ({ client }) => {
        while (Date.now() < deadline) {
          const start = performance.now();
          await client.callTool({ name: 'exec', arguments: { command: 'echo step' } });
          execTimes.push(performance.now() - start);
          jobs++;
          await client.callTool({ name: 'budget_status', arguments: {} });
        }
      }),
    );
    clearInterval(watch);
    const [events1, bytes1] = [eventCount(), storeBytes()];
    const rss = residentBytes(server.child.pid!);
    await closeSessions(sessions);
    execTimes.sort((a, b) => a - b);
    return {
      runs,
      seconds,
      slurm_jobs: jobs,
      exec_round_trip_p50_ms: round(percentile(execTimes, 50)),
      exec_round_trip_p99_ms: round(percentile(execTimes, 99)),
      events_per_second: round((events1 - events0) / seconds, 1),
      events_per_run_per_second: round((events1 - events0) / seconds / runs, 2),
      store_growth_kib_per_run_hour: round((bytes1 - bytes0) / 1024 / runs / (seconds / 3600), 1),
      server_fds_idle: idleFds,
      server_fds_peak: peakFds,
      server_rss_mib: round(rss / 2 ** 20, 1),
    };
  } finally {
    const exited = new Promise((resolve) => server.child.once('exit', resolve));
    server.child.kill('SIGTERM');
    await exited;
  }
}

/**
 * Post-hoc summaries over many recorded runs: a store of `runs` runs of `eventsPerRun`
 * events each (tool calls, resource samples, jobs, submissions), then the time to
 * summarise each run and to build the leaderboard over all of them.
 */
function reportsOverManyRuns(home: string, runs: number, eventsPerRun: number) {
  const task = getTask('micro-gsm8k');
  const store = new Store(join(home, 'reports.sqlite'));
  store.insertGrade({
    task_id: task.id,
    grader_version: task.graderVersion,
    content_hash: task.baseModelHash,
    public_score: 10,
    private_score: 12,
    details: '{}',
    duration_ms: 1,
    created_at: 0,
  });
  const budget = JSON.stringify(task.defaultLimits);
  store.db.transaction(() => {
    for (let r = 0; r < runs; r++) {
      const id = `run-${r}`;
      store.insertRun({
        id,
        task_id: task.id,
        label: `agent-${r % 4}`,
        budget,
        dir: join(home, id),
        sandbox: 'bwrap',
        grader_version: task.graderVersion,
        owner: '0-0',
        created_at: 0,
      });
      const event = (i: number, kind: string, name: string, data: unknown) =>
        store.insertEvent({ run_id: id, at: i * 1000, t_rel_ms: i * 1000, kind, name, data: JSON.stringify(data) });
      event(0, 'job', 'started', { job_id: r * 10 + 1, kind: 'training', command: 'python3 code/train.py --lr 1e-3', charged: true });
      for (let i = 1; i < eventsPerRun - 8; i++) {
        if (i % 2) event(i, 'sample', 'resources', { job_id: r * 10 + 1, cpu_s: i, cpu_percent: 100, memory_bytes: 1e8 });
        else event(i, 'tool', 'job_status', { arguments: { job_id: 'job-1' }, result: { state: 'running' }, duration_ms: 5 });
      }
      event(eventsPerRun, 'job', 'finished', {
        job_id: r * 10 + 1,
        kind: 'training',
        state: 'succeeded',
        exit_code: 0,
        charged: true,
        cpu_s: eventsPerRun,
        gpu_s: 0,
      });
      for (let k = 1; k <= 3; k++) {
        const hash = `${id}-${k}`;
        const { inserted } = store.insertSubmissionWithin(5, {
          run_id: id,
          path: 'output/final',
          note: null,
          content_hash: hash,
          files: 2,
          bytes: 1,
          created_at: k,
        }) as { inserted: { id: number } };
        const score = 10 + ((r * 7 + k * 13) % 40);
        recordGrade(store, task, hash, score);
        store.setSubmissionState(inserted.id, 'graded', null, k);
        event(eventsPerRun + k, 'submission', 'queued', { submission_id: inserted.id, path: 'output/final' });
        event(eventsPerRun + k, 'submission', 'graded', { submission_id: inserted.id, public_score: score, private_score: score - 1 });
      }
      store.endRun(id, 'done', (eventsPerRun + 10) * 1000);
    }
  })();
  let start = performance.now();
  for (let r = 0; r < runs; r++) analyzeRun(loadRunFacts(store, `run-${r}`));
  const summaryMs = (performance.now() - start) / runs;
  start = performance.now();
  const rows = buildLeaderboard(runResults(store));
  const leaderboardMs = performance.now() - start;
  store.close();
  return {
    runs,
    events_per_run: eventsPerRun,
    summary_ms_per_run: round(summaryMs),
    leaderboard_ms: round(leaderboardMs),
    groups: rows.length,
  };
}

/** Each interactive task: its environment's step rate alone, and rollouts with its base model (bench/level3.py). */
function interactiveTaskSpeed(taskId: string) {
  const task = getTask(taskId);
  const result = spawnSync(
    '/usr/bin/python3',
    [join(packageRoot, 'bench', 'level3.py'), '--task-dir', task.dir, '--package', task.env.package],
    { encoding: 'utf8' },
  );
  if (result.status !== 0) throw new Error(`bench/level3.py failed for ${taskId}: ${result.stderr}`);
  return JSON.parse(result.stdout) as Record<string, number>;
}

/** The shared decoder against decoding without a cache (bench/decoding.py). */
function decodingSpeed() {
  const result = spawnSync('/usr/bin/python3', [join(packageRoot, 'bench', 'decoding.py')], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`bench/decoding.py failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as Record<string, unknown>;
}

/**
 * The tools and snapshots that touch paths the agent controls, through a real server over
 * stdio: every path opened from a folder handle, one component at a time (src/util/safe-fs.ts).
 * A workspace with 1,000 files in code/ and a 100 MB checkpoint; `run_training` includes the
 * snapshot of code/, `submit_artifact` the copy and hash of the checkpoint (each repeat is a
 * duplicate, copied and hashed again, charged nothing).
 */
async function workspaceFileTools(home: string, calls: number) {
  const { client } = await connectStdio({
    task: 'micro-gsm8k',
    budget: 'submissions=5,compute=60m',
    label: 'bench',
    serverArgs: unlimitedCalls,
    home: join(home, 'file-tools'),
    stderr: 'ignore',
    clientName: 'a2rl-bench',
  });
  const tool = async (name: string, args: Record<string, unknown>) => {
    const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 300_000 });
    if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result.content)}`);
    return result.structuredContent as Record<string, any>;
  };
  const timed = async (runs: number, body: () => Promise<unknown>) => {
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await body();
      times.push(performance.now() - started);
    }
    return latencies(times);
  };
  try {
    const made = await tool('exec', {
      command:
        'python3 -c "import os, shutil\n' +
        "for d in range(10):\n os.makedirs(f'code/pkg{d}')\n for f in range(100): open(f'code/pkg{d}/f{f}.py', 'w').write('x = %d\\n' % f * 20)\n" +
        "os.makedirs('output/big'); shutil.copy('models/base/config.json', 'output/big/')\n" +
        "open('output/big/model.pt', 'wb').write(os.urandom(100 * 2**20))\"",
      timeout_s: 45,
    });
    if (made.exit_code !== 0) throw new Error(`making the workspace failed: ${JSON.stringify(made)}`);
    const snapshotTimes: number[] = [];
    for (let i = 0; i < Math.max(10, calls / 20); i++) {
      const started = performance.now();
      const job = await tool('run_training', { command: 'true' });
      snapshotTimes.push(performance.now() - started);
      await tool('job_status', { job_id: job.job_id, wait_seconds: 30 });
    }
    return {
      code_files: 1000,
      checkpoint_bytes: 100 * 2 ** 20,
      list_files_code_depth_2: await timed(calls, () => tool('list_files', { path: 'code', depth: 2 })),
      read_file: await timed(calls, () => tool('read_file', { path: 'code/pkg3/f7.py' })),
      write_file: await timed(calls, () => tool('write_file', { path: 'code/pkg9/nested/w.py', content: 'y = 1\n'.repeat(100) })),
      run_training_with_code_snapshot: latencies(snapshotTimes),
      submit_artifact_100mb: await timed(5, () => tool('submit_artifact', { path: 'output/big' })),
    };
  } finally {
    await client.close();
  }
}

/**
 * Browsers with a2rl's run pages open, in a process of their own as browsers are: each page's HTML, then its live
 * stream read until SIGTERM; prints "open" once every stream is open, and the bytes pushed when it ends.
 */
const pageReaderSource = `
const [url, token, ...runIds] = process.argv.slice(1);
const headers = { Authorization: 'Bearer ' + token };
let bytes = 0;
const streams = await Promise.all(runIds.map(async (runId) => {
  const html = await (await fetch(url + '/view/runs/' + runId, { headers })).text();
  const live = /data-live="([^"]+)"/.exec(html)[1].replace(/&amp;/g, '&');
  const stream = await fetch(url + live, { headers });
  if (stream.status !== 200) throw new Error('the live stream answered ' + stream.status);
  return stream.body.getReader();
}));
for (const reader of streams) void (async () => { for (;;) { const { done, value } = await reader.read(); if (done) return; bytes += value.length; } })();
process.once('SIGTERM', () => { process.stdout.write(bytes + '\\n'); process.exit(0); });
process.stdout.write('open\\n');
`;

/** Opens a run page on each run in a reader process; resolves once all are open, with a function that closes them and says the bytes pushed. */
async function openRunPages(url: string, token: string, runIds: string[]): Promise<() => Promise<number>> {
  const reader = spawn(process.execPath, ['--input-type=module', '-e', pageReaderSource, url, token, ...runIds], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  reader.stdout!.on('data', (chunk: Buffer) => (out += chunk));
  const exited = new Promise<void>((resolve) => reader.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    reader.stdout!.on('data', () => out.startsWith('open\n') && resolve());
    void exited.then(() => reject(new Error(`the page reader exited before its pages were open: ${out}`)));
  });
  return async () => {
    reader.kill('SIGTERM');
    await exited;
    return Number(out.slice('open\n'.length).trim());
  };
}

/**
 * The live web view's cost to agents: 10 sessions (one per run) call budget_status while 10 run pages (the page
 * and its Server-Sent Events stream, read by another process as a browser reads it) are open on those runs, against
 * the same with no page open. The two alternate in `rounds` slices so that load from elsewhere falls on both.
 */
async function viewLivePages(home: string, seconds: number, rounds: number) {
  const adminToken = randomBytes(16).toString('hex');
  const viewHome = join(home, 'view');
  const server = await startHttpServer(viewHome, adminToken);
  const loadBefore = loadavg();
  try {
    const runIds: string[] = [];
    const sessions = [];
    for (let i = 0; i < 10; i++) {
      const response = await fetch(`${server.url}/runs`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ task: 'micro-gsm8k', label: 'bench' }),
      });
      const created = (await response.json()) as { run_id: string; token: string };
      runIds.push(created.run_id);
      sessions.push(await connectHttp(server.url, created.token));
    }
    const clients = sessions.map((session) => session.client);
    await baselineGraded(clients[0]!);
    for (const client of clients) for (let i = 0; i < 10; i++) await client.callTool({ name: 'budget_status', arguments: {} });
    const none = { times: [] as number[], seconds: 0 };
    const live = { times: [] as number[], seconds: 0 };
    let pushedBytes = 0;
    for (let slice = 0; slice < rounds; slice++) {
      const quiet = await budgetStatusFor(clients, seconds / rounds);
      none.times.push(...quiet.times);
      none.seconds += quiet.seconds;
      const closePages = await openRunPages(server.url, viewToken(viewHome), runIds);
      const watched = await budgetStatusFor(clients, seconds / rounds);
      pushedBytes += await closePages();
      live.times.push(...watched.times);
      live.seconds += watched.seconds;
    }
    await closeSessions(sessions);
    const without = loadFigures(none, 10);
    const withPages = loadFigures(live, 10);
    return {
      seconds_each: seconds,
      rounds,
      no_pages: without,
      open_run_pages_10: { ...withPages, pushed_kib: round(pushedBytes / 1024, 1) },
      p99_ratio: round(withPages.p99_ms / without.p99_ms),
      target: { p99_ratio: 1.1 },
      load_average_1m: { before: round(loadBefore[0]!), after: round(loadavg()[0]!) },
    };
  } finally {
    await stopChild(server.child);
  }
}

async function sequential<T, R>(inputs: T[], f: (input: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (const input of inputs) out.push(await f(input));
  return out;
}

const home = mkdtempSync(join(tmpdir(), 'a2rl-bench-'));
const sections: Record<string, () => Promise<unknown>> = {
  budget_status_round_trip_stdio: () => budgetStatusRoundTrip(home, 30),
  sandbox_start_exec_true_bwrap: () => bubblewrapStart(100),
  sandbox_start_exec_true_docker: () => sandboxStart(new DockerBackend({ owner: benchOwner }), 100),
  sandbox_create_docker: () => sandboxCreation(new DockerBackend({ owner: benchOwner }), 10),
  // On a local two-node cluster: each job an sbatch, a bubblewrap sandbox on its node, its end seen by squeue.
  sandbox_start_exec_true_slurm: () => onLocalSlurm(() => sandboxStart(new SlurmBackend(benchOwner, { sharedRoot: tmpdir() }), 50)),
  slurm_many_runs: () => onLocalSlurm(() => slurmLoad(home, 32, 60)),
  grading_throughput: async () =>
    Object.fromEntries(await sequential(listTaskIds('micro'), async (id) => [id, await gradingThroughput(home, id)] as const)),
  program_sandbox_micro_humaneval: () => programSandboxOverhead(home, 60),
  mcp_over_http: () => httpServing(home, 128, 15),
  many_files_workspace: () => manyFilesWorkspace(home, 150_000, 500),
  contamination_check_1gb: async () => contaminationCheckCost(home),
  workspace_file_tools: () => workspaceFileTools(home, 300),
  reports_over_many_runs: async () => reportsOverManyRuns(home, 200, 1000),
  decoding: async () => decodingSpeed(),
  interactive_env_and_rollouts: async () =>
    Object.fromEntries(
      listTaskIds('micro')
        .filter((id) => getTask(id).level === 3)
        .map((id) => [id, interactiveTaskSpeed(id)] as const),
    ),
  view_live_pages: () => viewLivePages(home, 40, 8),
  search_round_trip: () => searchRoundTrip(home, 20, 250),
};
const selected = process.argv.slice(2);
const unknown = selected.filter((name) => !(name in sections));
if (unknown.length > 0) {
  process.stderr.write(`bench: no section ${unknown.join(', ')}; sections: ${Object.keys(sections).join(', ')}\n`);
  process.exit(2);
}
const resultsFile = join(packageRoot, 'bench', 'results.json');
// A partial run keeps what the others last measured, with the time each was measured at.
const recorded = (selected.length > 0 ? JSON.parse(readFileSync(resultsFile, 'utf8')) : { measured_at: {} }) as Record<string, unknown> & {
  measured_at: Record<string, string>;
};
const results: Record<string, unknown> = {
  ...recorded,
  machine: {
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? 'unknown',
    memory_gib: round(totalmem() / 2 ** 30, 1),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
  },
};
for (const [name, measure] of Object.entries(sections)) {
  if (selected.length > 0 && !selected.includes(name)) continue;
  results[name] = await measure();
  recorded.measured_at[name] = new Date().toISOString();
}
results.measured_at = recorded.measured_at;
process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
