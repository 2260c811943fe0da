import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, describe, expect, it } from 'vitest';
import { call, waitJob } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import {
  attack,
  backends,
  connectHttp,
  createHttpRun,
  type HttpServer,
  killServer,
  newMarker,
  recordFigure,
  sleep,
  startHttpServer,
  stdioRun,
  makeCheckpoint,
  whenGone,
  whenRunning,
  withStore,
} from './harness.js';

/** Starts a process that detaches twice (its own session, parent gone), ignores TERM and burns CPU. */
const detachedBurner = (marker: string) => `(setsid sh -c 'trap "" TERM HUP; python3 -c "while True: pass" ${marker}' &) ; sleep 600`;

describe.each(backends)('red team, budget evasion (%s)', (backend) => {
  const home = tempDir('rt-budget');
  const clients: Client[] = [];
  let server: HttpServer | undefined;

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  it('spends the compute budget with a detached burner: stopped, no process left, nothing new starts', () =>
    attack('budget-evasion', 'jobs after compute is spent', backend, async () => {
      const { client, runId } = await stdioRun(home, backend, { budget: 'compute=4s' });
      clients.push(client);
      const marker = newMarker();
      const started = await call(client, 'run_training', { command: detachedBurner(marker) });
      await whenRunning(marker);
      const job = await waitJob(client, started.structured.job_id, 300);
      expect(job.state).toBe('budget_stopped');
      const gone = await whenGone(marker, 10_000);
      expect(gone).toBeDefined();
      // When the server saw the compute spent (its samples run every second).
      const exhausted = withStore(home, (store) => store.listEvents(runId, 'budget').find((e) => e.name === 'compute_exhausted'));
      expect(exhausted).toBeDefined();
      recordFigure({ kind: 'stop_latency', case: 'compute exhausted, detached burner', backend, seconds: (gone! - exhausted!.at) / 1000 });
      for (const [tool, args] of [
        ['run_training', { command: 'true' }],
        ['exec', { command: 'true' }],
        ['launch_rollouts', { episodes: 1 }],
      ] as const) {
        const refused = await call(client, tool, args);
        expect(refused.text, tool).toMatch(/\[BUDGET_EXHAUSTED\]/);
      }
      const used = (await call(client, 'budget_status')).structured.compute_seconds.used;
      await sleep(2000);
      expect((await call(client, 'budget_status')).structured.compute_seconds.used).toBe(used);
    }));

  it('outlives the wall clock with a detached burner: the run ends, the last process dies within seconds', () =>
    attack('budget-evasion', 'jobs after the wall clock ends', backend, async () => {
      const { client, runId } = await stdioRun(home, backend, { budget: 'wall=6s' });
      clients.push(client);
      const marker = newMarker();
      await call(client, 'run_training', { command: detachedBurner(marker) });
      await whenRunning(marker);
      const gone = await whenGone(marker, 30_000);
      expect(gone).toBeDefined();
      const run = withStore(home, (store) => store.getRun(runId)!);
      const wallEnd = run.created_at + 6000;
      recordFigure({ kind: 'stop_latency', case: 'wall clock ended, detached burner', backend, seconds: (gone! - wallEnd) / 1000 });
      expect(run).toMatchObject({ state: 'ended', end_reason: 'wall-clock budget exhausted' });
      expect((await call(client, 'run_training', { command: 'true' })).text).toMatch(/\[RUN_ENDED\]/);
    }));

  it('detaches a burner to keep training after cancel: nothing survives, compute stops growing', () =>
    attack('budget-evasion', 'detached process after cancel', backend, async () => {
      const { client } = await stdioRun(home, backend);
      clients.push(client);
      const marker = newMarker();
      const started = await call(client, 'run_training', { command: detachedBurner(marker) });
      await whenRunning(marker);
      await sleep(1000);
      const cancelledAt = Date.now();
      expect((await call(client, 'cancel_job', { job_id: started.structured.job_id })).structured.state).toBe('cancelled');
      const gone = await whenGone(marker, 15_000);
      expect(gone).toBeDefined();
      recordFigure({ kind: 'stop_latency', case: 'cancel, detached burner', backend, seconds: (gone! - cancelledAt) / 1000 });
      const used = (await call(client, 'budget_status')).structured.compute_seconds.used;
      await sleep(2000);
      expect((await call(client, 'budget_status')).structured.compute_seconds.used).toBe(used);
    }));

  it('races two submissions past the cap from two sessions of one run: exactly one is accepted', () =>
    attack('budget-evasion', 'racing submissions past the cap', backend, async () => {
      const run = await createHttpRun(home, 'submissions=1');
      server = await startHttpServer(home, backend);
      const [first, second] = [await connectHttp(server.url, run.token), await connectHttp(server.url, run.token)];
      clients.push(first, second);
      for (const [client, scale] of [
        [first, 1.01],
        [second, 1.02],
      ] as const) {
        await makeCheckpoint(client, `output/s${scale}`, scale);
      }
      const results = await Promise.all([
        call(first, 'submit_artifact', { path: 'output/s1.01' }),
        call(second, 'submit_artifact', { path: 'output/s1.02' }),
        call(first, 'submit_artifact', { path: 'output/s1.02' }),
        call(second, 'submit_artifact', { path: 'output/s1.01' }),
      ]);
      const accepted = results.filter((r) => !r.isError);
      const ids = new Set(accepted.map((r) => r.structured.submission_id));
      expect(ids.size).toBe(1);
      for (const refused of results.filter((r) => r.isError)) expect(refused.text).toMatch(/\[BUDGET_EXHAUSTED\] All 1 submissions/);
      expect(withStore(home, (store) => store.listSubmissions(run.run_id)).length).toBe(1);
      expect((await call(first, 'budget_status')).structured.submissions).toMatchObject({ used: 1, left: 0 });
    }));
});
