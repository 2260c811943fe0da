import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execSlotWaitMs, maxConcurrentExecs, maxConcurrentJobs, runJobsRoom } from '../../src/core/run.js';
import { getTask } from '../../src/tasks/task.js';
import { startInProcess } from '../helpers/in-process.js';
import { call } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import {
  attack,
  backends,
  connectHttp,
  createHttpRun,
  type HttpServer,
  killServer,
  makeCheckpoint,
  newMarker,
  recordFigure,
  startHttpServer,
  stdioRun,
  waitBaseline,
  whenRunning,
  withStore,
} from './harness.js';

const jobMemoryMb = getTask('micro-gsm8k').jobs.memoryMb;

/** Most intervals [start, end] that cover one instant. */
function mostAtOnce(intervals: Array<[number, number]>): number {
  const edges = intervals.flatMap(([start, end]) => [
    [start, 1],
    [end, -1],
  ]);
  // An end before a start at the same instant: touching intervals did not overlap.
  edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let now = 0;
  let most = 0;
  for (const [, step] of edges) most = Math.max(most, (now += step!));
  return most;
}

describe.each(backends)('red team, no run holds more than its share of sandboxes and memory (%s)', (backend) => {
  const home = tempDir('rt-load');
  let run: Awaited<ReturnType<typeof stdioRun>>;

  beforeAll(async () => {
    run = await stdioRun(home, backend);
  });

  afterAll(async () => {
    await run?.client.close();
  });

  const runningJobs = () =>
    withStore(home, (store) => store.listJobs(run.runId).filter((job) => job.state === 'running' && job.kind !== 'grading'));

  it(`starts 30 execs at once: at most ${maxConcurrentExecs} run together, the rest are refused with CONFLICT and cost nothing`, () =>
    attack('bounds', 'exec flood', backend, async () => {
      const execsBefore = withStore(home, (store) => store.listJobs(run.runId, ['exec']).length);
      // Each command prints when it ran, by the sandbox's clock; long enough that the flood lands while the first still run.
      const results = await Promise.all(
        Array.from({ length: 30 }, () =>
          call(run.client, 'exec', { command: 'echo start $(date +%s%N); sleep 4; echo end $(date +%s%N)', timeout_s: 30 }),
        ),
      );
      const ran = results.filter((result) => !result.isError);
      const refused = results.filter((result) => result.isError);
      for (const result of refused) {
        expect(result.text).toMatch(
          new RegExp(
            `^\\[CONFLICT\\] This command was not started and nothing was charged: ${maxConcurrentExecs} exec commands of this run are already running \\(job-\\d+, job-\\d+\\), at most ${maxConcurrentExecs} at once\\. Run commands one after another, or start long work with run_training\\.$`,
          ),
        );
      }
      expect(refused.length).toBeGreaterThan(0);
      const intervals = ran.map((result): [number, number] => {
        expect(result.structured.state, result.text).toBe('succeeded');
        const [, start, end] = /start (\d+)\nend (\d+)/.exec(result.structured.output)!;
        return [Number(start) / 1e6, Number(end) / 1e6];
      });
      expect(mostAtOnce(intervals)).toBeLessThanOrEqual(maxConcurrentExecs);
      // A refused exec left no job behind: only those that ran are recorded (and charged).
      expect(withStore(home, (store) => store.listJobs(run.runId, ['exec']).length) - execsBefore).toBe(ran.length);
      recordFigure({ kind: 'exec_flood', backend, ran: ran.length, refused: refused.length, most_at_once: mostAtOnce(intervals) });
    }));

  it(`holds the run's memory room: ${maxConcurrentJobs} full-memory trainings leave room for one exec, not two`, () =>
    attack('bounds', 'memory room', backend, async () => {
      const trainings = [];
      for (let i = 0; i < maxConcurrentJobs; i++) {
        const started = await call(run.client, 'run_training', { command: 'sleep 300' });
        expect(started.isError, started.text).toBe(false);
        trainings.push(started.structured.job_id as string);
      }
      try {
        const marker = newMarker();
        const first = call(run.client, 'exec', { command: `sleep 5; true # ${marker}` });
        await whenRunning(marker);
        const second = await call(run.client, 'exec', { command: 'echo never' });
        const room = jobMemoryMb * runJobsRoom;
        expect(second.text).toMatch(
          new RegExp(
            `^\\[CONFLICT\\] This job was not started and nothing was charged: the run's running jobs \\((job-\\d+, ){3}job-\\d+\\) hold ${4 * jobMemoryMb} MiB of memory, and with this one's ${jobMemoryMb} MiB they would pass the ${room} MiB all of a run's jobs may hold together\\. Wait for one to end \\(job_status with wait_seconds\\) or stop one \\(cancel_job\\)\\.$`,
          ),
        );
        const held = runningJobs().reduce((sum, job) => sum + JSON.parse(job.resources).memoryBytes, 0);
        expect(held).toBeLessThanOrEqual(room * 2 ** 20);
        expect((await first).structured.state).toBe('succeeded');
        // One training stopped: its room takes the second exec.
        await call(run.client, 'cancel_job', { job_id: trainings.pop()! });
        const both = await Promise.all(['a', 'b'].map((word) => call(run.client, 'exec', { command: `sleep 1; echo ${word}` })));
        expect(both.map((result) => result.structured.output)).toEqual(['a\n', 'b\n']);
      } finally {
        for (const job of trainings) await call(run.client, 'cancel_job', { job_id: job });
      }
      expect(runningJobs()).toEqual([]);
    }));
});

describe.each(backends)("red team, one server's exec cap across runs (%s)", (backend) => {
  const home = tempDir('rt-load-http');
  let server: HttpServer;
  const clients: Client[] = [];

  beforeAll(async () => {
    server = await startHttpServer(home, backend, ['--max-execs', '1']);
  });

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  it('makes an exec past --max-execs wait for a slot, takes one that frees, and refuses with BUSY when none does', () =>
    attack('bounds', 'exec flood across runs', backend, async () => {
      const [mine, theirs] = await Promise.all([createHttpRun(home), createHttpRun(home)]);
      const holder = await connectHttp(server.url, mine.token);
      const other = await connectHttp(server.url, theirs.token);
      clients.push(holder, other);
      const hold = async (seconds: number) => {
        const marker = newMarker();
        const holding = call(holder, 'exec', { command: `sleep ${seconds}; true # ${marker}` });
        await whenRunning(marker);
        // Wrapped: an async function returning the call itself would wait for it to end.
        return { holding };
      };
      // A slot freed within the wait is taken.
      const brief = await hold(1);
      expect((await call(other, 'exec', { command: 'echo waited' })).structured.output).toBe('waited\n');
      expect((await brief.holding).structured.state).toBe('succeeded');
      // A slot held past the wait: refused, after waiting, and nothing was started.
      const long = await hold(20);
      const began = Date.now();
      const refused = await call(other, 'exec', { command: 'echo later' });
      expect(Date.now() - began, refused.text).toBeGreaterThanOrEqual(execSlotWaitMs);
      expect(refused.text).toBe(
        `[BUSY] This command was not started and nothing was charged: the server is running its limit of 1 exec commands across all runs, and none ended within ${execSlotWaitMs / 1000} s. Try again shortly; start long work with run_training.`,
      );
      expect((await call(other, 'job_status')).structured.jobs.map((job: { job_id: string }) => job.job_id)).toEqual(['job-1']);
      // The long jobs' cap is apart: a training still starts.
      const training = await call(other, 'run_training', { command: 'sleep 300' });
      expect(training.structured.state, training.text).toBe('running');
      expect((await long.holding).structured.state).toBe('succeeded');
      expect((await call(other, 'exec', { command: 'echo later' })).structured.output).toBe('later\n');
      await call(other, 'cancel_job', { job_id: training.structured.job_id });
    }));
});

describe.each(backends)('red team, the ids a run sees are its own (%s)', (backend) => {
  const home = tempDir('rt-ids');
  let server: HttpServer;
  const clients: Client[] = [];

  beforeAll(async () => {
    server = await startHttpServer(home, backend);
  });

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  it("numbers each run's jobs and submissions 1, 2, 3…: no number reaches another run's, or tells that it exists", () =>
    attack('bounds', 'global ids', backend, async () => {
      const runs = await Promise.all([createHttpRun(home), createHttpRun(home)]);
      const [a, b] = await Promise.all(runs.map((run) => connectHttp(server.url, run.token)));
      clients.push(a!, b!);
      for (const [client, name] of [
        [a!, 'A'],
        [b!, 'B'],
      ] as const) {
        const job = await call(client, 'exec', { command: `echo run ${name}` });
        expect(job.structured.job_id).toBe('job-1');
        await makeCheckpoint(client, 'output/mine', name === 'A' ? 1.01 : 1.02);
        const submitted = await call(client, 'submit_artifact', { path: 'output/mine', note: `run ${name}` });
        expect(submitted.structured.submission_id, submitted.text).toBe('sub-1');
      }
      const bStatus = await call(b!, 'job_status', { job_id: 'job-1' });
      expect(bStatus.structured.jobs[0].command).toBe('echo run B');
      expect((await call(b!, 'job_logs', { job_id: 'job-1' })).structured.lines).toEqual(['run B']);
      expect((await call(b!, 'get_score', { submission_id: 'sub-1' })).structured.submissions[0].note).toBe('run B');
      // Every number the store has given out, and past them: B's own job or submission, or NOT_FOUND.
      const highest = withStore(home, (store) => store.db.prepare('SELECT MAX(id) AS n FROM jobs').get() as { n: number }).n;
      for (let n = 1; n <= highest + 2; n++) {
        const job = await call(b!, 'job_status', { job_id: `job-${n}` });
        if (job.isError) expect(job.text).toMatch(/^\[NOT_FOUND\] No job "job-\d+" in this run/);
        else expect(job.structured.jobs[0].command).not.toMatch(/run A/);
        const cancel = await call(b!, 'cancel_job', { job_id: `job-${n}` });
        if (!cancel.isError) expect(cancel.structured.command).not.toMatch(/run A/);
        const score = await call(b!, 'get_score', { submission_id: `sub-${n}` });
        if (score.isError) expect(score.text).toMatch(/^\[NOT_FOUND\] No submission/);
        else expect(score.structured.submissions[0].note).toBe('run B');
      }
      const listed = (await call(b!, 'job_status')).structured.jobs.map((job: { job_id: string }) => job.job_id);
      expect(listed).toEqual(['job-1', 'job-2']);
      expect((await call(a!, 'job_status', { job_id: 'job-1' })).structured.jobs[0].command).toBe('echo run A');
    }));
});

describe("red team, job_logs greps and job logs cannot hold the server's event loop or its jobs", () => {
  const home = tempDir('rt-grep');
  let served: Awaited<ReturnType<typeof startInProcess>>;

  beforeAll(async () => {
    served = await startInProcess({ home });
    // The baseline's grading done first: what the server does meanwhile is the calls' doing.
    await waitBaseline(served.client);
  });

  afterAll(async () => {
    await served?.close();
  });

  it('answers three greps of a 500-character alternation over a 32 MiB log while the loop never stalls for 100 ms; a fourth is BUSY', () =>
    attack('bounds', 'hostile grep', 'in-process', async () => {
      const { client, run } = served;
      const started = await call(client, 'exec', { command: 'true' });
      const job = run.listJobs(['exec']).at(-1)!;
      // The log a job could have written (its cap is 32 MiB): long lines none of the alternatives match.
      const block = Buffer.from(`${'loss 0.25 step 1000 '.repeat(99)}\n`.repeat(500));
      const fd = openSync(job.log_path, 'w');
      for (let written = 0; written < 32 * 2 ** 20; written += block.length) writeSync(fd, block);
      closeSync(fd);
      // 250 distinct one-character alternatives, none in the log: each line is searched for every one.
      const grep = Array.from({ length: 250 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join('|');
      const delay = monitorEventLoopDelay({ resolution: 5 });
      delay.enable();
      const began = performance.now();
      const calls = await Promise.all(
        Array.from({ length: 4 }, () => call(client, 'job_logs', { job_id: started.structured.job_id, grep })),
      );
      const wallMs = performance.now() - began;
      delay.disable();
      const longestStallMs = delay.max / 1e6;
      recordFigure({ kind: 'hostile_grep', longest_stall_ms: longestStallMs, wall_ms: wallMs });
      const answers = calls.filter((result) => !result.isError);
      expect(calls.filter((result) => result.isError).map((result) => result.text)).toEqual([
        "[BUSY] 3 grep or start_line reads of this run's logs are still running, at most 3 at once; nothing was read. Wait for their answers and ask again (a plain tail is answered at once).",
      ]);
      expect(answers).toHaveLength(3);
      for (const answer of answers) {
        expect(answer.isError, answer.text).toBe(false);
        expect(answer.structured.lines).toEqual([]);
        // Either the whole log was read, or the answer says where the scan stopped, and why.
        if (answer.structured.total_lines === undefined)
          expect(answer.structured.stopped_early).toMatch(/^scanned for its limit of 5 s, at line \d+$/);
      }
      // Relative to the greps' own time, so a slower machine moves both sides: today's code held the loop for a third of it.
      expect(longestStallMs).toBeLessThan(wallMs / 10);
    }));

  it('refuses a job whose log cannot be opened: nothing is recorded as running, and the next job starts', async () => {
    const { client, run } = served;
    const jobsBefore = run.listJobs(['exec', 'training', 'rollouts', 'grading']);
    // A folder stands where the next job's log would be.
    const planted = join(run.dir, 'logs', `job-${Math.max(...jobsBefore.map((job) => job.id)) + 1}.log`);
    mkdirSync(planted);
    const refused = await call(client, 'exec', { command: 'echo never' });
    rmSync(planted, { recursive: true });
    expect(refused.text).toBe(
      '[UNAVAILABLE] The job was not started: the server could not open its log (EISDIR). Nothing ran, and nothing was recorded or charged; try again, and report it if it persists.',
    );
    expect(run.listJobs(['exec'])).toEqual(jobsBefore.filter((job) => job.kind === 'exec'));
    expect(run.budget().compute_seconds.used).toBe(0);
    // No ghost row holds a slot: a full set of execs starts at once.
    const execs = await Promise.all(
      Array.from({ length: maxConcurrentExecs }, () => call(client, 'exec', { command: 'sleep 1; echo ran' })),
    );
    expect(execs.map((result) => result.structured.output)).toEqual(Array(maxConcurrentExecs).fill('ran\n'));
  });
});
