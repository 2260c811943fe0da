import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { closeSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxMessageBytes } from '../../src/mcp/message-limit.js';
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
  sleep,
  startHttpServer,
  stdioRun,
  withStore,
} from './harness.js';

/** Small bounds, so each attack passes them many times over in seconds; the code paths are those of the defaults. */
const maxLogMiB = 2;
const quotaMiB = 64;
const callsPerSecond = 20;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

describe.each(backends)('red team, bounded logs, reads, messages and call rates (%s)', (backend) => {
  const home = tempDir('rt-bounds');
  let server: HttpServer;
  let client: Client;
  let other: Client;
  let runId: string;

  beforeAll(async () => {
    const run = await createHttpRun(home);
    const otherRun = await createHttpRun(home);
    runId = run.run_id;
    server = await startHttpServer(home, backend, [
      '--disk-quota',
      String(quotaMiB),
      '--max-log',
      String(maxLogMiB),
      '--calls-per-second',
      String(callsPerSecond),
    ]);
    client = await connectHttp(server.url, run.token);
    other = await connectHttp(server.url, otherRun.token);
  });

  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await other?.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  /** The host log of the job the agent knows as `jobId` (its number in the run). */
  const logOf = (jobId: string) => withStore(home, (store) => store.getJobBySeq(runId, Number(jobId.replace('job-', '')))!.log_path);
  const capBytes = maxLogMiB * 2 ** 20;
  /** The marker line adds a few dozen bytes to the cap. */
  const logBound = capBytes + 200;

  it('floods its output: the log stays at its cap, and the run stays inside its disk account and quota', () =>
    attack('bounds', 'output flood', backend, async () => {
      const started = await call(client, 'run_training', { command: 'yes "flood flood flood flood flood flood"' });
      expect(started.isError, started.text).toBe(false);
      const jobId = started.structured.job_id as string;
      // Until the job has written ten times the cap: the log never holds more than the cap.
      let dropped = 0;
      let largest = 0;
      for (const deadline = Date.now() + 120_000; dropped < 10 * capBytes; await sleep(200)) {
        if (Date.now() > deadline) throw new Error(`only ${dropped} bytes dropped after 120 s`);
        largest = Math.max(largest, statSync(logOf(jobId)).size);
        dropped = Number(/\[a2rl: (\d+) bytes of output dropped here/.exec(readFileSync(logOf(jobId), 'latin1'))?.[1] ?? 0);
      }
      expect(largest).toBeLessThanOrEqual(logBound);
      const cancelled = await call(client, 'cancel_job', { job_id: jobId });
      expect(cancelled.structured.state).toBe('cancelled');
      const log = readFileSync(logOf(jobId), 'utf8');
      expect(log.length).toBeLessThanOrEqual(logBound);
      expect(log.startsWith('flood flood')).toBe(true);
      expect(log).toMatch(/\n\[a2rl: \d+ bytes of output dropped here; a job log keeps its first 1048576 and last 1048576 bytes\]\n/);
      const tail = await call(client, 'job_logs', { job_id: jobId, tail: 5 });
      expect(tail.structured.lines.at(-2)).toBe('flood flood flood flood flood flood');
      // Waits for a measurement that sees the log as it ended, however long a loaded machine takes to walk it.
      const logBytes = statSync(logOf(jobId)).size;
      let disk = (await call(client, 'budget_status')).structured.disk_bytes;
      for (const deadline = Date.now() + 120_000; disk.used < logBytes && Date.now() < deadline; await sleep(200)) {
        disk = (await call(client, 'budget_status')).structured.disk_bytes;
      }
      expect(disk.used).toBeGreaterThanOrEqual(logBytes);
      expect(disk.used).toBeLessThan(quotaMiB * 2 ** 20);
      recordFigure({ kind: 'log_flood', backend, dropped_bytes: dropped, log_bytes: statSync(logOf(jobId)).size, disk_used: disk.used });
    }));

  it('reads a 1 GB log: the default tail costs what it costs on a small log, a grep stops at its bound and says so', () =>
    attack('bounds', 'huge log reads', backend, async () => {
      const small = await call(client, 'exec', { command: 'seq 1 50' });
      const big = await call(client, 'exec', { command: 'echo start' });
      // A finished job's log made 1 GB, sparse: the reader cannot tell, and the disk is spared.
      const fd = openSync(logOf(big.structured.job_id), 'r+');
      writeSync(fd, Buffer.from('\nthe last line\n'), 0, 15, 2 ** 30);
      closeSync(fd);
      expect(statSync(logOf(big.structured.job_id)).size).toBeGreaterThan(2 ** 30);
      const time = async (jobId: string) => {
        const started = performance.now();
        const result = await call(client, 'job_logs', { job_id: jobId });
        return { ms: performance.now() - started, result };
      };
      const smallMs: number[] = [];
      const bigMs: number[] = [];
      for (let i = 0; i < 5; i++) {
        smallMs.push((await time(small.structured.job_id)).ms);
        const { ms, result } = await time(big.structured.job_id);
        bigMs.push(ms);
        expect(result.structured.lines.at(-1), result.text.slice(0, 300)).toBe('the last line');
        expect(result.structured.total_lines).toBeUndefined();
      }
      recordFigure({ kind: 'job_logs_tail_1gb', backend, p50_ms: median(bigMs), small_p50_ms: median(smallMs) });
      expect(median(bigMs)).toBeLessThan(5 * median(smallMs) + 100);
      const grep = await call(client, 'job_logs', { job_id: big.structured.job_id, grep: 'last line' });
      expect(grep.structured.stopped_early).toMatch(/scanned its limit of 67108864 bytes|scanned for its limit/);
      expect(grep.structured.total_lines).toBeUndefined();
    }));

  it('calls in a tight loop: it gets RATE_LIMITED with when to retry, every call is recorded, another run is unaffected', () =>
    attack('bounds', 'call flood', backend, async () => {
      await sleep(3000); // A full bucket.
      const eventsBefore = withStore(home, (s) => s.listEvents(runId, 'tool').length);
      const started = Date.now();
      const flood = await Promise.all(Array.from({ length: 300 }, () => call(client, 'budget_status')));
      const seconds = (Date.now() - started) / 1000;
      const limited = flood.filter((r) => r.isError);
      // The burst, then the sustained rate over however long the flood took here.
      expect(flood.length - limited.length).toBeGreaterThanOrEqual(2 * callsPerSecond);
      expect(flood.length - limited.length).toBeLessThanOrEqual(2 * callsPerSecond + Math.ceil(callsPerSecond * seconds) + 1);
      recordFigure({ kind: 'call_flood', backend, calls: flood.length, refused: limited.length, seconds });
      expect(limited[0]?.text).toMatch(/^\[RATE_LIMITED\] .*retry in \d+\.\d s/);
      const otherAnswer = await call(other, 'budget_status');
      expect(otherAnswer.isError, otherAnswer.text).toBe(false);
      await sleep(1000);
      expect((await call(client, 'budget_status')).isError).toBe(false);
      // Refused calls are part of the record too.
      expect(withStore(home, (s) => s.listEvents(runId, 'tool').length) - eventsBefore).toBe(301);
    }));

  it('sends a 30 MB message over stdio: that request gets an error, the session goes on', () =>
    attack('bounds', 'oversized stdio message', backend, async () => {
      const stdioHome = tempDir('rt-bounds-stdio');
      const stdio = await stdioRun(stdioHome, backend);
      try {
        const content = 'x'.repeat(30 * 2 ** 20);
        const refused = await stdio.client
          .callTool({ name: 'write_file', arguments: { path: 'code/huge.txt', content } }, undefined, { timeout: 120_000 })
          .then(
            () => 'answered',
            (error: Error) => error.message,
          );
        expect(refused).toMatch(
          new RegExp(`\\[TOO_LARGE\\] This message is \\d+ bytes; a message may be at most ${maxMessageBytes} bytes`),
        );
        const written = await call(stdio.client, 'write_file', { path: 'code/small.txt', content: 'fits' });
        expect(written.isError, written.text).toBe(false);
        expect(readFileSync(join(stdio.workspace, 'code', 'small.txt'), 'utf8')).toBe('fits');
        const events = withStore(stdioHome, (s) => s.listEvents(stdio.runId, 'tool').map((e) => JSON.parse(e.data)));
        expect(events.some((e) => /TOO_LARGE/.test(e.error ?? '') && e.bytes > 30 * 2 ** 20)).toBe(true);
      } finally {
        await stdio.client.close();
      }
    }));
});
