import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cliEntry } from '../../src/util/paths.js';
import { Store } from '../../src/store/store.js';
import { adminToken, type HttpServer, killServer, startHttpServer as startServerOverHttp } from '../helpers/http-server.js';
import { call, settledBaseline, startServer, tweakScript, waitJob } from '../helpers/mcp.js';

/**
 * The red-team suite runs once per sandbox backend named here (comma-separated), so a
 * new backend is tested by listing it: A2RL_REDTEAM_BACKENDS=bwrap,docker.
 */
export const backends = (process.env.A2RL_REDTEAM_BACKENDS ?? 'bwrap')
  .split(',')
  .map((name) => name.trim())
  .filter(Boolean);

/** `serve` flags that select a backend; bubblewrap is the default and needs none. */
export function backendArgs(backend: string): string[] {
  return backend === 'bwrap' ? [] : ['--sandbox', backend];
}

export { adminToken, type HttpServer, killServer };

/** A stdio run (a real `a2rl serve` child) on the given backend, with its id and workspace. */
export async function stdioRun(home: string, backend: string, options: { budget?: string; serverArgs?: string[] } = {}) {
  const client = await startServer({
    home,
    budget: options.budget,
    label: 'redteam',
    serverArgs: [...backendArgs(backend), ...(options.serverArgs ?? [])],
  });
  const runId = (await call(client, 'budget_status')).structured.run_id as string;
  return { client, runId, workspace: join(home, 'runs', runId, 'workspace') };
}

/** `a2rl serve --http` on a free loopback port, on the given backend. */
export function startHttpServer(home: string, backend: string, args: string[] = []): Promise<HttpServer> {
  return startServerOverHttp(home, [...backendArgs(backend), ...args]);
}

/** A run for a remote agent, made as an operator makes it (`a2rl runs create`). */
export async function createHttpRun(home: string, budget = 'wall=30m'): Promise<{ run_id: string; token: string }> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [cliEntry, 'runs', 'create', '--task', 'micro-gsm8k', '--budget', budget, '--label', 'redteam', '--json'],
    { env: { ...process.env, A2RL_HOME: home } },
  );
  return JSON.parse(stdout);
}

export async function connectHttp(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'a2rl-redteam', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

/** Opens the store read-only-in-spirit for one look; closes it after. */
export function withStore<T>(home: string, look: (store: Store) => T): T {
  const store = new Store(join(home, 'store.sqlite'));
  try {
    return look(store);
  } finally {
    store.close();
  }
}

/** Every recorded grade and submission of the store: what an attack must leave as it was. */
export function recordedScores(home: string): string {
  return withStore(home, (store) =>
    JSON.stringify({
      grades: store.db
        .prepare('SELECT task_id, grader_version, content_hash, public_score, private_score FROM grades ORDER BY content_hash')
        .all(),
      submissions: store.db.prepare('SELECT id, run_id, seq, content_hash, state FROM submissions ORDER BY id').all(),
    }),
  );
}

/** A word to put in an attack's command line, so its processes can be found on the host whatever the backend. */
export function newMarker(): string {
  return `a2rlredteam${randomBytes(5).toString('hex')}`;
}

/** Live (not zombie) host processes whose command line holds the marker. */
export function markedProcesses(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z') found.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** Polls until no process holds the marker; resolves with the time that happened, or undefined after `ms`. */
export async function whenGone(marker: string, ms: number): Promise<number | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (markedProcesses(marker).length === 0) return Date.now();
    if (Date.now() > deadline) return undefined;
    await sleep(50);
  }
}

/**
 * Polls until the job's own command holds the marker (the attack is really running): the
 * marker is in the sandbox launchers' arguments (the cgroup-joining shell, bwrap) from the
 * start, before the sandbox is set up.
 */
export async function whenRunning(marker: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  const commandRuns = () =>
    markedProcesses(marker).some((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        // Not bwrap itself, nor the shell that joins the job's cgroups and then becomes bwrap.
        return !cmdline.startsWith('bwrap\0') && !cmdline.includes('$A2RL_CGROUP_PROCS');
      } catch {
        return false;
      }
    });
  while (!commandRuns()) {
    if (Date.now() > deadline) throw new Error(`no process with ${marker} started within ${ms} ms`);
    await sleep(50);
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Figures for the closing note (attacks by class, crash points, fuzz cases, stop latency),
 * one JSON line each, appended to A2RL_REDTEAM_FIGURES when set; `node scripts/redteam-figures.mjs` sums them.
 */
export function recordFigure(figure: Record<string, unknown>): void {
  const file = process.env.A2RL_REDTEAM_FIGURES;
  if (file) appendFileSync(file, `${JSON.stringify({ ...figure, at: new Date().toISOString() })}\n`);
}

/** Runs one scripted attack and records whether it was blocked (the attack's assertions all held). */
export async function attack(attackClass: string, name: string, backend: string, body: () => Promise<void>): Promise<void> {
  try {
    await body();
    recordFigure({ kind: 'attack', class: attackClass, name, backend, blocked: true });
  } catch (error) {
    recordFigure({ kind: 'attack', class: attackClass, name, backend, blocked: false, error: String(error).slice(0, 300) });
    throw error;
  }
}

/** Waits until the run's baseline is graded, so later changes to the recorded scores are the attacks' doing. */
export async function waitBaseline(client: Client, seconds = 180): Promise<number> {
  const baseline = await settledBaseline(client, seconds);
  if (baseline.state !== 'graded') throw new Error(`baseline ${baseline.state}: ${baseline.error}`);
  return baseline.score as number;
}

/**
 * Saves a perturbed copy of the base model at `out` through a training job (no 45 s exec
 * limit: a loaded machine may need longer). The same scale gives the same content.
 */
export async function makeCheckpoint(client: Client, out: string, scale: number): Promise<void> {
  await runToEnd(client, tweakScript(out, scale));
}

/** Runs a command as a training job and waits for it to succeed. */
export async function runToEnd(client: Client, command: string): Promise<void> {
  const started = await call(client, 'run_training', { command });
  if (started.isError) throw new Error(`could not start the job: ${started.text}`);
  const job = await waitJob(client, started.structured.job_id, 600);
  if (job.state !== 'succeeded') throw new Error(`the job ended ${job.state}: ${job.reason}`);
}

/**
 * Opens every file under /proc/sys and /sys for writing and writes nothing: the open is the test,
 * so a failing run never changes the machine. Links are not followed (O_NOFOLLOW).
 */
export const openForWriting = `
import json, os
tried, opened = 0, []
for top in ("/proc/sys", "/sys"):
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            tried += 1
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW)
            except OSError:
                continue
            os.close(fd)
            opened.append(path)
print(json.dumps({"tried": tried, "opened": opened}))
`;
