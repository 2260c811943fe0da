import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { processTree } from '../../sandbox/process-tree.js';
import { localSlurmUnavailable, startLocalSlurm } from '../helpers/slurm.js';
import { call, type CallResult, waitScore } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import {
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
  markedProcesses,
  waitBaseline,
  whenGone,
  whenRunning,
  withStore,
} from './harness.js';

interface Answered {
  tool: string;
  args: Record<string, unknown>;
}

/** Processes of a host process tree still alive (not zombies). */
function alive(pids: number[]): number[] {
  return pids.filter((pid) => existsSync(`/proc/${pid}`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')));
}

describe.each(backends)('crash recovery: SIGKILL the HTTP server, restart, reconnect (%s)', (backend) => {
  const home = tempDir('rt-crash');
  let run: { run_id: string; token: string };
  let server: HttpServer;
  let client: Client;
  /** Every tool call that got an answer: each must be in the record after any crash. */
  const answered: Answered[] = [];

  const tracked = async (name: string, args: Record<string, unknown> = {}): Promise<CallResult> => {
    const result = await call(client, name, args);
    answered.push({ tool: name, args });
    return result;
  };

  /** Answered calls with no recorded tool event (matched by name and arguments, each event used once). */
  function lostEvents(): Answered[] {
    const events = withStore(home, (store) => store.listEvents(run.run_id, 'tool')).map((e) => ({
      tool: e.name,
      args: JSON.stringify((JSON.parse(e.data) as { arguments: unknown }).arguments),
    }));
    return answered.filter((call) => {
      const index = events.findIndex((e) => e.tool === call.tool && e.args === JSON.stringify(call.args));
      if (index === -1) return true;
      events.splice(index, 1);
      return false;
    });
  }

  async function crashAndRestart(point: string): Promise<number[]> {
    const tree = processTree(server.child.pid!).slice(1);
    await killServer(server);
    const lost = lostEvents();
    recordFigure({ kind: 'crash', point, backend, answered_calls: answered.length, events_lost: lost.length });
    expect(lost).toEqual([]);
    server = await startHttpServer(home, backend);
    client = await connectHttp(server.url, run.token);
    return tree;
  }

  beforeAll(async () => {
    run = await createHttpRun(home);
    server = await startHttpServer(home, backend);
    client = await connectHttp(server.url, run.token);
    await waitBaseline(client);
  });

  afterAll(async () => {
    await client?.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  it('during training: no event lost, no process left, the job is lost, the agent reconnects with its token and continues', async () => {
    const marker = newMarker();
    await tracked('write_file', { path: 'code/before.txt', content: 'before the crash' });
    const started = await tracked('run_training', {
      command: `(setsid sh -c 'trap "" TERM; python3 -c "while True: pass" ${marker}' &); python3 -c "import time; time.sleep(600)" ${marker}`,
    });
    await whenRunning(marker);
    const killedAt = Date.now();
    await crashAndRestart('HTTP server during training');
    const gone = await whenGone(marker, 10_000);
    expect(gone).toBeDefined();
    recordFigure({ kind: 'stop_latency', case: 'server SIGKILLed during training', backend, seconds: (gone! - killedAt) / 1000 });
    expect((await tracked('job_status', { job_id: started.structured.job_id })).structured.jobs[0]).toMatchObject({ state: 'lost' });
    expect((await tracked('budget_status')).structured).toMatchObject({ run_id: run.run_id, run_state: 'active' });
    expect((await tracked('read_file', { path: 'code/before.txt' })).structured.content).toBe('before the crash');
    expect((await tracked('exec', { command: 'echo continued' })).structured.output).toBe('continued\n');
  });

  let crashedScore: { score: number; hash: string };

  it('during grading: no event lost, no grader left, the grading is re-queued and scores the same', async () => {
    await makeCheckpoint(client, 'output/crash', 1.03);
    const submitted = await tracked('submit_artifact', { path: 'output/crash' });
    const seq = Number(String(submitted.structured.submission_id).replace('sub-', ''));
    const state = () => withStore(home, (store) => store.getSubmissionBySeq(run.run_id, seq)!.state);
    for (let i = 0; i < 600 && state() !== 'grading'; i++) await sleep(100);
    expect(state()).toBe('grading');
    await sleep(500);
    const tree = await crashAndRestart('HTTP server during grading');
    expect(tree.length).toBeGreaterThan(0);
    await sleep(1000);
    expect(alive(tree)).toEqual([]);
    const graded = (await waitScore(client, submitted.structured.submission_id)).submissions[0];
    answered.push({ tool: 'get_score', args: { submission_id: submitted.structured.submission_id, wait_seconds: 20 } });
    expect(graded.state).toBe('graded');
    crashedScore = { score: graded.score, hash: graded.content_hash };
  });

  it('during a burst of tool calls: every answered call is recorded and its effect kept; the agent continues', async () => {
    // Twenty callers keep calls in flight until the crash, so it lands mid-burst on a fast host as on a slow one.
    const burstClient = client;
    let sent = 0;
    let answers = 0;
    const failures: string[] = [];
    let running = 20;
    let crashed = false;
    const caller = async () => {
      while (!crashed) {
        const i = sent++;
        const { tool, args } =
          i % 2 === 0
            ? { tool: 'write_file', args: { path: `code/burst-${i}.txt`, content: `burst ${i}` } }
            : { tool: 'list_files', args: { path: 'code', depth: 1 + (i % 5) } };
        try {
          await call(burstClient, tool, args);
        } catch (error) {
          failures.push(String(error));
          running--;
          return;
        }
        answered.push({ tool, args });
        answers++;
      }
    };
    const callers = Array.from({ length: running }, caller);
    while (answers < 10 && running > 0) await sleep(5);
    // The burst was answered until the crash, not refused from the start.
    expect(failures).toEqual([]);
    await crashAndRestart('HTTP server during a burst of tool calls');
    crashed = true;
    // Calls were in flight when the server died: the crash landed mid-burst.
    expect(sent).toBeGreaterThan(answers);
    // A call cut off mid-response waits for its client's timeout: closing the client ends them.
    await burstClient.close();
    await Promise.all(callers);
    for (const { tool, args } of answered.filter((a) => a.tool === 'write_file' && String(a.args.path).startsWith('code/burst-'))) {
      const read = await tracked('read_file', { path: args.path });
      expect(read.structured.content, tool).toBe(args.content);
    }
    expect((await tracked('exec', { command: 'ls code | wc -l' })).isError).toBe(false);
    expect(lostEvents()).toEqual([]);
  });

  it('grades the same checkpoint, uninterrupted elsewhere, to the same score', async () => {
    const reference = await stdioRun(tempDir('rt-crash-ref'), backend);
    try {
      await makeCheckpoint(reference.client, 'output/crash', 1.03);
      const submitted = await call(reference.client, 'submit_artifact', { path: 'output/crash' });
      const graded = (await waitScore(reference.client, submitted.structured.submission_id)).submissions[0];
      expect(graded.content_hash).toBe(crashedScore.hash);
      expect(graded.score).toBe(crashedScore.score);
    } finally {
      await reference.client.close();
    }
  });
});

describe.each(backends)('crash recovery: SIGKILL the stdio server during training (%s)', (backend) => {
  it('the next start ends the run, marks the job lost, and no sandbox process is left', async () => {
    const home = tempDir('rt-crash-stdio');
    const { client, runId } = await stdioRun(home, backend);
    const marker = newMarker();
    const started = await call(client, 'run_training', { command: `python3 -c "while True: pass" ${marker}` });
    await whenRunning(marker);
    // Answered so far: budget_status (in stdioRun) and run_training.
    const answeredCalls = 2;
    const serverPid = withStore(home, (store) => Number(store.getRun(runId)!.owner.split('-')[0]));
    const killedAt = Date.now();
    process.kill(serverPid, 'SIGKILL');
    const gone = await whenGone(marker, 10_000);
    expect(gone).toBeDefined();
    recordFigure({ kind: 'stop_latency', case: 'stdio server SIGKILLed during training', backend, seconds: (gone! - killedAt) / 1000 });
    await client.close().catch(() => undefined);
    const next = await stdioRun(home, backend);
    try {
      const lost = answeredCalls - withStore(home, (store) => store.listEvents(runId, 'tool').length);
      recordFigure({ kind: 'crash', point: 'stdio server during training', backend, answered_calls: answeredCalls, events_lost: lost });
      expect(lost).toBe(0);
      withStore(home, (store) => {
        expect(store.getRun(runId)).toMatchObject({ state: 'ended', end_reason: 'the server stopped before the run ended' });
        expect(store.getJobBySeq(runId, Number(started.structured.job_id.replace('job-', '')))).toMatchObject({ state: 'lost' });
      });
    } finally {
      await next.client.close();
    }
  });
});

const slurmUnavailable = localSlurmUnavailable();

describe.skipIf(slurmUnavailable)(
  `crash recovery on Slurm: SIGKILL the HTTP server during training, restart, reconnect${slurmUnavailable ? ` (skipped: ${slurmUnavailable})` : ''}`,
  () => {
    // A real two-node cluster on this host; /tmp, where the server home lies, stands for the shared filesystem.
    const slurmArgs = ['--sandbox', 'slurm', '--shared-root', tmpdir()];
    const home = tempDir('rt-crash-slurm');
    let stopCluster: () => Promise<void> = async () => undefined;
    let server: HttpServer | undefined;
    let client: Client | undefined;

    beforeAll(async () => {
      const cluster = await startLocalSlurm();
      stopCluster = cluster.stop;
      process.env.SLURM_CONF = cluster.conf;
    });

    afterAll(async () => {
      await client?.close().catch(() => undefined);
      if (server) await killServer(server);
      await stopCluster();
    });

    it("the restarted server finds the dead server's Slurm job with squeue and cancels it; the job is lost; the agent continues", async () => {
      const run = await createHttpRun(home);
      server = await startHttpServer(home, 'bwrap', slurmArgs);
      client = await connectHttp(server.url, run.token);
      const marker = newMarker();
      const started = await call(client, 'run_training', { command: `python3 -c "while True: pass" ${marker}` });
      await whenRunning(marker, 60_000);
      const slurmJobs = () =>
        execFileSync('squeue', ['-h', '-t', 'pending,running', '-o', '%j'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
      // The job is a Slurm job named after its owner, and outlives the server's SIGKILL.
      expect(slurmJobs()).toContainEqual(expect.stringMatching(new RegExp(`^a2rl\\.\\d+-\\d+\\.${String(started.structured.job_id)}$`)));
      await killServer(server);
      await sleep(1000);
      expect(markedProcesses(marker).length).toBeGreaterThan(0);
      server = await startHttpServer(home, 'bwrap', slurmArgs);
      client = await connectHttp(server.url, run.token);
      expect(await whenGone(marker, 20_000)).toBeDefined();
      expect(slurmJobs().filter((name) => name.endsWith(`.${String(started.structured.job_id)}`))).toEqual([]);
      expect((await call(client, 'job_status', { job_id: started.structured.job_id })).structured.jobs[0]).toMatchObject({ state: 'lost' });
      const budget = (await call(client, 'budget_status')).structured;
      expect(budget).toMatchObject({ run_id: run.run_id, run_state: 'active' });
      expect(budget.compute_measured_by).toMatch(/Slurm job's own cgroup/);
      expect((await call(client, 'exec', { command: 'echo continued' })).structured.output).toBe('continued\n');
    });
  },
);
