import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { z } from 'zod';
import { kernelStorageUnavailable, workspaceImage } from '../../sandbox/run-storage.js';
import { Engine } from '../../src/core/engine.js';
import { RecordingTransport } from '../../src/mcp/recording-transport.js';
import { eventRecorder } from '../../src/store/events.js';
import { Store } from '../../src/store/store.js';
import { cannotRecord, minFreeBytesToAct } from '../../src/store/disk-full.js';
import { freeBytes } from '../../src/util/disk-usage.js';
import { cliEntry } from '../../src/util/paths.js';
import { call, settledBaseline, waitJob } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import {
  attack,
  connectHttp,
  createHttpRun,
  type HttpServer,
  killServer,
  newMarker,
  startHttpServer,
  whenRunning,
  withStore,
} from './harness.js';

/** The home's filesystem: room for the store, two runs and the baseline's grading, then filled on purpose. */
const homeMiB = 160;
/** What the outside fill leaves before the run fills the rest: above the gate, below what the run's job writes. */
const leftForTheRunBytes = minFreeBytesToAct + 4 * 2 ** 20;

const refusal = "[UNAVAILABLE] The server cannot record this call: disk full on the server's home. Nothing was changed; try again later.";

/** Writes `path` until the filesystem refuses (ENOSPC), at most `bytes`: a disk filled as a process fills it. */
function fill(path: string, bytes = Number.POSITIVE_INFINITY): void {
  const fd = openSync(path, 'a');
  try {
    for (let written = 0, chunk = Buffer.alloc(2 ** 16); written < bytes;) {
      written += writeSync(fd, chunk, 0, Math.min(chunk.length, bytes - written));
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}

const isRoot = process.getuid?.() === 0;

describe.skipIf(!isRoot)('red team, a full disk is an answer, not a crash (bwrap; needs root to mount a tmpfs home)', () => {
  const home = tempDir('rt-disk-full');
  let mounted = false;
  let server: HttpServer;
  let filler: { client: Client; runId: string };
  let other: { client: Client; runId: string };

  beforeAll(async () => {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${homeMiB}m`, 'a2rl-disk-full', home]);
    mounted = true;
    // Quotas the home can hold (two runs' images), or the second run is refused as overcommitting the disk: what fills the
    // home here is the run's job output, which lives outside its image.
    server = await startHttpServer(home, 'bwrap', ['--disk-quota', '24']);
    const [a, b] = [await createHttpRun(home), await createHttpRun(home)];
    filler = { client: await connectHttp(server.url, a.token), runId: a.run_id };
    other = { client: await connectHttp(server.url, b.token), runId: b.run_id };
    // The baseline's grading writes to the home: done before the disk fills, so that what fails is what the test makes.
    await settledBaseline(other.client, 180);
  }, 300_000);

  afterAll(async () => {
    try {
      await filler?.client.close();
      await other?.client.close();
      if (server) await killServer(server);
    } finally {
      if (mounted) execFileSync('umount', ['--lazy', home]);
    }
  });

  it('one run fills the home through exec: the server stays up, every call is answered (refused while full), and both runs go on once space is freed', () =>
    attack('bounds', 'disk full', 'bwrap', async () => {
      const ballast = join(home, 'ballast');
      // From outside first, down to a little above the gate; then the run fills the rest through its job's output, which
      // its log (in the run's folder, outside its workspace and its quota) takes until the home is full.
      fill(ballast, freeBytes(home) - leftForTheRunBytes);
      const filling = await call(filler.client, 'exec', {
        command: "yes 'output of a job on a full disk' | head -c 40000000; echo the job went on",
        timeout_s: 20,
      });
      // Answered: its result, or the refusal of an answer that could not be recorded.
      if (filling.isError) expect(filling.text).toMatch(/^\[UNAVAILABLE\] The server cannot record this call: disk full/);
      // From outside too: whatever room the run's quota left, the home is now full.
      fill(join(home, 'ballast-2'));
      expect(freeBytes(home)).toBeLessThan(minFreeBytesToAct);

      // Every call of both runs is answered at once, refused with nothing done; the server serves on.
      for (const { client } of [filler, other]) {
        expect(await call(client, 'budget_status')).toMatchObject({ isError: true, text: refusal });
      }
      const refusedWrite = await call(other.client, 'write_file', { path: 'code/while-full.txt', content: 'x' });
      expect(refusedWrite).toMatchObject({ isError: true, text: refusal });
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      expect(server.child.exitCode).toBeNull();
      // The operator is warned: by the doctor and by the live view.
      const doctor = spawnSync(process.execPath, [cliEntry, 'doctor'], { encoding: 'utf8', env: { ...process.env, A2RL_HOME: home } });
      expect(doctor.stdout).toMatch(/^disk\twarning: the disk of the server's home \(.+\) has 0 MiB free, under 1 GiB/m);
      const view = await fetch(`${server.url}/view`, {
        headers: { Authorization: `Bearer ${readFileSync(join(home, 'view-token'), 'utf8').trim()}` },
      });
      expect(await view.text()).toMatch(/<p class="warning" role="alert">Warning: the disk of the server&#39;s home/);

      // Space freed by the operator: both runs go on, no restart.
      for (const path of [ballast, join(home, 'ballast-2')]) rmSync(path);
      for (const { client, runId } of [filler, other]) {
        const status = await call(client, 'budget_status');
        expect(status.isError, status.text).toBe(false);
        expect(status.structured.run_id).toBe(runId);
      }
      expect(existsSync(join(home, 'runs', other.runId, 'workspace', 'code', 'while-full.txt'))).toBe(false);
      const written = await call(other.client, 'write_file', { path: 'code/after-full.txt', content: 'back' });
      expect(written.isError, written.text).toBe(false);
      expect((await call(other.client, 'read_file', { path: 'code/after-full.txt' })).text).toContain('back');
      const echo = await call(filler.client, 'exec', { command: 'echo back', timeout_s: 10 });
      expect(echo.isError, echo.text).toBe(false);
      expect(echo.structured.output).toContain('back');

      // The filling job ended on record, its log cut with a note and the cut in its record.
      const filled = withStore(home, (store) => store.listJobs(filler.runId, ['exec'])[0]!);
      const ended = await waitJob(filler.client, `job-${filled.seq}`, 60);
      expect(ended.state).toBe('succeeded');
      expect(ended.reason).toMatch(/its log was cut after \d+ bytes: the server could not write it \(ENOSPC\)/);
      const finished = withStore(home, (store) =>
        store.db.prepare(`SELECT data FROM events WHERE run_id = ? AND kind = 'job' AND name = 'finished'`).all(filler.runId),
      ) as Array<{ data: string }>;
      expect(finished.map((event) => JSON.parse(event.data).log_cut?.error)).toContain('ENOSPC');

      // Filled from outside while a call is in flight: it is still answered, with its recorded result, or, where its
      // record could not be written, refused (the store may still take it in log space it already holds).
      const marker = newMarker();
      const inFlight = call(other.client, 'exec', { command: `sleep 2; echo ${marker}`, timeout_s: 20 });
      await whenRunning(marker);
      fill(join(home, 'ballast-3'));
      const answered = await inFlight;
      if (answered.isError) {
        // Its answer's record failed (RecordingTransport), or a write of the store inside the tool did (defineTool).
        expect(answered.text).toMatch(
          /^\[UNAVAILABLE\] The server cannot record this call: disk full on the server's home\. (It|Part of it) may have been done\b.*try(ing)? again later\.$/,
        );
      } else {
        // Ended and answered; its output is there, or its log was cut.
        expect(answered.structured.state, JSON.stringify(answered)).toBe('succeeded');
        expect(answered.structured.output.includes(marker) || /its log was cut/.test(answered.text), answered.text).toBe(true);
      }
      rmSync(join(home, 'ballast-3'));
      expect((await call(other.client, 'budget_status')).isError).toBe(false);
      expect(server.child.exitCode).toBeNull();
    }));
});

describe.skipIf(!isRoot)('an answer the store cannot record (needs root to mount a tmpfs)', () => {
  const dir = tempDir('disk-full-store');
  let mounted = false;
  let store: Store | undefined;

  afterAll(() => {
    try {
      store?.close();
    } finally {
      if (mounted) execFileSync('umount', ['--lazy', dir]);
    }
  });

  it('leaves as an UNAVAILABLE error, never not at all, over a real store on a full disk; an error answer leaves as it was', async () => {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'a2rl-disk-full-store', dir]);
    mounted = true;
    store = new Store(join(dir, 'store.sqlite'));
    const runId = 'full';
    store.insertRun({
      id: runId,
      task_id: 'micro-gsm8k',
      label: null,
      grader_version: 'test',
      owner: 'test',
      budget: '{}',
      dir,
      sandbox: 'bwrap',
      created_at: Date.now(),
    });
    const server = new McpServer({ name: 'disk-full', version: '1' });
    server.registerTool('echo', { inputSchema: { fail: z.boolean() } }, async ({ fail }) => ({
      isError: fail,
      content: [{ type: 'text', text: fail ? '[NOT_FOUND] what the tool said' : 'a result' }],
    }));
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(new RecordingTransport(serverSide, eventRecorder(store, runId, Date.now())));
    const client = new Client({ name: 'disk-full', version: '1' });
    await client.connect(clientSide);
    const recorded = () => store!.listEvents(runId).filter((event) => event.kind === 'tool').length;
    expect(await call(client, 'echo', { fail: false })).toMatchObject({ isError: false, text: 'a result' });
    expect(recorded()).toBe(1);

    fill(join(dir, 'ballast'));
    expect(await call(client, 'echo', { fail: false })).toMatchObject({
      isError: true,
      text: "[UNAVAILABLE] The server cannot record this call: disk full on the server's home. It may have been done (look with the read tools: list_files, job_status); try again later.",
    });
    expect(await call(client, 'echo', { fail: true })).toMatchObject({ isError: true, text: '[NOT_FOUND] what the tool said' });
    expect(recorded()).toBe(1);

    // The same connection records again once space is back.
    rmSync(join(dir, 'ballast'));
    expect(await call(client, 'echo', { fail: false })).toMatchObject({ isError: false, text: 'a result' });
    expect(recorded()).toBe(2);
    await client.close();
  });
});

describe('what a call the store cannot record is told', () => {
  it('says disk full only for a full disk, and an I/O error for a disk that fails', () => {
    const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const failed = Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_WRITE' });
    expect(cannotRecord(undefined, full).message).toBe(refusal.slice('[UNAVAILABLE] '.length));
    expect(cannotRecord().message).toBe(refusal.slice('[UNAVAILABLE] '.length));
    expect(cannotRecord(undefined, failed).message).toBe(
      "The server cannot record this call: the server's disk failed (I/O error). Nothing was changed; try again later.",
    );
  });
});

describe.skipIf(!isRoot || kernelStorageUnavailable() !== undefined)(
  "a new run's image the home cannot hold beside the live runs' (needs root to mount a tmpfs home)",
  () => {
    const home = tempDir('rt-overcommit');
    let mounted = false;
    const engines: Engine[] = [];
    const open = async (options: { overcommitDisk?: boolean }, warnings: string[] = []) => {
      const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line).msg) });
      // Closing leaves the baselines' gradings unsettled at once: what is tested here is made before them.
      const engine = await Engine.open({ home, logger, diskQuotaBytes: quotaMiB * 2 ** 20, gradingGraceMs: 0, ...options });
      engines.push(engine);
      return engine;
    };
    /** Half the home and some: one run's image fits, a second beside it does not. */
    const quotaMiB = 100;

    afterAll(async () => {
      try {
        for (const engine of engines) await engine.close();
      } finally {
        if (mounted) execFileSync('umount', ['--lazy', home]);
      }
    });

    it('is refused with the numbers and what to do, and made with a warning under --overcommit-disk', async () => {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${homeMiB}m`, 'a2rl-overcommit', home]);
      mounted = true;
      const engine = await open({});
      const why = (quota: number) =>
        `the home ${home} has \\d+ MiB free, less than this run's ${quota} MiB quota plus the \\d+ MiB the live runs' workspace images may still grow \\(\\d+ MiB\\); free space \\(a2rl runs clean --ended frees ended runs' images\\), serve with a smaller --disk-quota, or serve with --overcommit-disk`;
      // Two at once, room for one: the binding check is made in one step with the image, so they cannot both pass.
      const made = await Promise.allSettled(['first', 'second'].map((label) => engine.createRun({ taskId: 'micro-gsm8k', label })));
      const served = made.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
      const failures = made.flatMap((outcome) => (outcome.status === 'rejected' ? [(outcome.reason as Error).message] : []));
      expect(served).toHaveLength(1);
      expect(failures[0]).toMatch(new RegExp(`^(Run \\S+ cannot be served here|The run was not created): ${why(quotaMiB)}`));
      const first = served[0]!;
      expect(existsSync(join(first.dir, workspaceImage))).toBe(true);
      // The refused one left no active run behind: ended with why where its row was written, and no image.
      const rows = withStore(home, (store) => store.listRuns().filter((run) => run.id !== first.id));
      for (const row of rows) {
        expect(row.state).toBe('ended');
        expect(row.end_reason).toMatch(/^it could not be served: Run \S+ cannot be served here: the home/);
        expect(existsSync(join(row.dir, workspaceImage))).toBe(false);
      }
      expect(withStore(home, (store) => store.listActiveRuns().map((run) => run.id))).toEqual([first.id]);
      // Its quota alone fits the home's free space; with what the first run's image may still grow, it does not: refused
      // before anything is written.
      expect(freeBytes(home)).toBeGreaterThan(quotaMiB * 2 ** 20);
      const before = withStore(home, (store) => store.listRuns().length);
      const refused = await engine.createRun({ taskId: 'micro-gsm8k', label: 'refused' }).then(
        () => undefined,
        (error: Error) => error.message,
      );
      expect(refused).toMatch(
        new RegExp(
          `^The run was not created: ${why(quotaMiB)} to make the run anyway \\(a run that fills its image first then meets I/O errors\\)\\.$`,
        ),
      );
      expect(withStore(home, (store) => store.listRuns().length)).toBe(before);
      await engine.close();

      // Opted in: made, and the operator warned in the log as before. The first run is still active (its server
      // closed, the run left as it was), so its image may still grow and the home stays overcommitted.
      const warnings: string[] = [];
      const overcommitting = await open({ overcommitDisk: true }, warnings);
      const third = await overcommitting.createRun({ taskId: 'micro-gsm8k', label: 'third' });
      expect(existsSync(join(third.dir, workspaceImage))).toBe(true);
      expect(warnings.join('\n')).toMatch(/the live runs' workspace images may still grow by \d+ MiB, more than the \d+ MiB free/);
      await third.end('the test is done with it');
    });
  },
);
