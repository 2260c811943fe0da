import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { rmSync, statSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kernelStorageUnavailable } from '../../sandbox/run-storage.js';
import { keepAliveSeconds } from '../../src/mcp/transports/http/serve.js';
import { call, waitJob } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import {
  attack,
  backends,
  connectHttp,
  createHttpRun,
  type HttpServer,
  killServer,
  markedProcesses,
  newMarker,
  recordFigure,
  recordedScores,
  sleep,
  startHttpServer,
  waitBaseline,
  whenGone,
  whenRunning,
} from './harness.js';

/** The workspace quota the server here enforces, small enough to fill in a second. */
const quotaMiB = 40;

describe.each(backends)('red team, escaping limits (%s)', (backend) => {
  const home = tempDir('rt-escape');
  let server: HttpServer;
  let client: Client;
  let runId: string;
  let scoresBefore: string;

  beforeAll(async () => {
    const run = await createHttpRun(home);
    runId = run.run_id;
    server = await startHttpServer(home, backend, ['--disk-quota', String(quotaMiB)]);
    client = await connectHttp(server.url, run.token);
    await waitBaseline(client);
    scoresBefore = recordedScores(home);
  });

  afterAll(async () => {
    await client?.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  it('has no network: no DNS, no TCP to the HTTP server on loopback or to any host address, no raw sockets', () =>
    attack('escape-limits', 'network', backend, async () => {
      const hostAddresses = Object.values(networkInterfaces())
        .flat()
        .filter((a) => a && a.family === 'IPv4')
        .map((a) => a!.address);
      const script = `
import socket, json
out = {}
try:
    socket.getaddrinfo("registry.npmjs.org", 443); out["dns"] = "resolved"
except OSError as e:
    out["dns"] = "failed"
for host in ${JSON.stringify(hostAddresses)}:
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, ${server.port})); out["tcp " + host] = "connected"
    except OSError as e:
        out["tcp " + host] = "failed"
for name, args in [("raw", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)), ("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0))]:
    try:
        socket.socket(*args); out[name] = "opened"
    except OSError as e:
        out[name] = "failed"
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
print(json.dumps(out))
`;
      await call(client, 'write_file', { path: 'code/net.py', content: script });
      const probe = await call(client, 'exec', { command: 'python3 code/net.py' });
      const out = JSON.parse(probe.structured.output);
      expect(hostAddresses).toContain('127.0.0.1');
      for (const [key, value] of Object.entries(out)) if (key !== 'interfaces') expect(value, key).toBe('failed');
      expect(out.interfaces).toEqual(['lo']);
      // The server on that port is alive and answering: the refusal is the sandbox's.
      expect((await call(client, 'budget_status')).structured.run_state).toBe('active');
    }));

  it('contains a fork bomb: the server keeps answering, and cancel leaves no process', () =>
    attack('escape-limits', 'fork bomb', backend, async () => {
      // A bomb on every core starves the host: idle connections must not be closed under the client's feet meanwhile.
      const health = await fetch(`${server.url}/healthz`);
      expect(health.headers.get('keep-alive')).toBe(`timeout=${keepAliveSeconds}`);
      const marker = newMarker();
      // The bomb in a subshell, and the job's own process then waiting without a fork: once the bomb holds every pid
      // the job may have, a fork of the job's own shell fails, and a shell that cannot fork exits (the job would end
      // `failed` before it is cancelled). The wait keeps the marker ($0) in its command line, as the bomb's shells do.
      const bomb = `(b() { b | b & }; b); exec python3 -c "import time; time.sleep(600)" "$0"`;
      const started = await call(client, 'run_training', { command: `sh -c '${bomb}' ${marker}` });
      await whenRunning(marker);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const before = Date.now();
      expect((await call(client, 'budget_status')).isError).toBe(false);
      expect(Date.now() - before).toBeLessThan(3000);
      expect(markedProcesses(marker).length).toBeLessThanOrEqual(256);
      const cancelled = await call(client, 'cancel_job', { job_id: started.structured.job_id });
      expect(cancelled.structured.state).toBe('cancelled');
      expect(await whenGone(marker, 5000)).toBeDefined();
    }));

  it('fills the disk: held at the quota (by the kernel, or stopped by the walk), writes refused until files are deleted', () =>
    attack('escape-limits', 'disk filling', backend, async () => {
      try {
        await fillDisk();
      } finally {
        // Whatever failed, the next attacks get their room back.
        rmSync(join(home, 'runs', runId, 'workspace', 'output', 'fill'), { force: true });
      }
    }));

  async function fillDisk(): Promise<void> {
    const started = await call(client, 'run_training', {
      command: 'dd if=/dev/urandom of=output/fill bs=1M count=100000 2>&1; sleep 600',
    });
    const fill = join(home, 'runs', runId, 'workspace', 'output', 'fill');
    if (kernelStorageUnavailable() === undefined) {
      // The workspace is a filesystem of the quota's size: dd itself is refused at it, and nothing passes it.
      const logs = async () => (await call(client, 'job_logs', { job_id: started.structured.job_id })).structured.lines.join('\n');
      for (const deadline = Date.now() + 120_000; !/No space left on device/.test(await logs()); await sleep(200)) {
        if (Date.now() > deadline) throw new Error(`dd was not refused within 120 s: ${await logs()}`);
      }
      recordFigure({ kind: 'disk_overshoot_mib', backend, value: statSync(fill).size / 2 ** 20 - quotaMiB });
      expect(statSync(fill).size).toBeLessThanOrEqual(quotaMiB * 2 ** 20);
      expect((await call(client, 'cancel_job', { job_id: started.structured.job_id })).structured.state).toBe('cancelled');
      const refusedWrite = await call(client, 'write_file', { path: 'code/more.txt', content: 'x'.repeat(2 ** 20) });
      expect(refusedWrite.text).toMatch(/\[QUOTA_EXCEEDED\] The workspace is full.*rm -r/);
    } else {
      const job = await waitJob(client, started.structured.job_id, 300);
      expect(job.state).toBe('budget_stopped');
      expect(job.reason).toMatch(/disk quota is 40 MiB: the job was stopped\. Delete/);
      recordFigure({ kind: 'disk_overshoot_mib', backend, value: statSync(fill).size / 2 ** 20 - quotaMiB });
      const refusedWrite = await call(client, 'write_file', { path: 'code/more.txt', content: 'x' });
      expect(refusedWrite.text).toMatch(/\[QUOTA_EXCEEDED\].*disk quota is 40 MiB.*rm -r/);
      const refusedJob = await call(client, 'run_training', { command: 'true' });
      expect(refusedJob.text).toMatch(/\[QUOTA_EXCEEDED\]/);
      const budget = await call(client, 'budget_status');
      expect(budget.structured.disk_bytes.left).toBe(0);
    }
    expect((await call(client, 'budget_status')).structured.disk_bytes.limit).toBe(quotaMiB * 2 ** 20);
    // exec still runs, so the agent can delete; then writing works again.
    expect((await call(client, 'exec', { command: 'rm output/fill' })).structured.exit_code).toBe(0);
    expect((await call(client, 'write_file', { path: 'code/more.txt', content: 'x' })).isError).toBe(false);
  }

  it('fills /tmp or exhausts memory: the job is killed at its memory limit, the server is unharmed', () =>
    attack('escape-limits', 'memory exhaustion and /tmp filling', backend, async () => {
      for (const command of [
        'python3 -c "x = b\'\\x01\' * (2 * 2**30); print(len(x))"',
        'dd if=/dev/zero of=/tmp/fill bs=1M count=4096 2>&1; ls -la /tmp',
      ]) {
        const started = await call(client, 'run_training', { command, memory_mb: 256 });
        expect(started.isError, started.text).toBe(false);
        const job = await waitJob(client, started.structured.job_id, 300);
        expect(job.state, command).toMatch(/oom_killed|failed/);
        if (job.state === 'oom_killed') expect(job.reason).toMatch(/out of memory \(limit 256 MiB\)/);
      }
      expect((await call(client, 'budget_status')).structured.run_state).toBe('active');
    }));

  it('ignores SIGTERM: cancel still ends it (KILL after the grace) and no process is left', () =>
    attack('escape-limits', 'ignoring SIGTERM', backend, async () => {
      const marker = newMarker();
      const started = await call(client, 'run_training', {
        command: `python3 -c "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)" ${marker}`,
      });
      await whenRunning(marker);
      const cancelledAt = Date.now();
      const cancelled = await call(client, 'cancel_job', { job_id: started.structured.job_id });
      expect(cancelled.structured.state).toBe('cancelled');
      const gone = await whenGone(marker, 15_000);
      expect(gone).toBeDefined();
      recordFigure({ kind: 'stop_latency', case: 'cancel ignoring TERM', backend, seconds: (gone! - cancelledAt) / 1000 });
      expect(gone! - cancelledAt).toBeLessThan(10_000);
    }));

  it('leaves processes behind after exec and training jobs end: none survive', () =>
    attack('escape-limits', 'processes left behind', backend, async () => {
      const marker = newMarker();
      const daemon = `(setsid sh -c 'trap "" TERM HUP; sleep 600' ${marker} &) ; (nohup sh -c 'sleep 600' ${marker} >/dev/null 2>&1 &)`;
      const ran = await call(client, 'exec', { command: `${daemon}; echo started` });
      expect(ran.structured).toMatchObject({ state: 'succeeded', output: 'started\n' });
      expect(await whenGone(marker, 3000)).toBeDefined();
      const training = await call(client, 'run_training', { command: `${daemon}; sleep 1; echo done` });
      expect((await waitJob(client, training.structured.job_id, 60)).state).toBe('succeeded');
      expect(await whenGone(marker, 3000)).toBeDefined();
    }));

  it('leaves every recorded score as it was', () =>
    attack('escape-limits', 'scores untouched', backend, async () => {
      expect(recordedScores(home)).toBe(scoresBefore);
    }));
});
