import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxInstance } from '../sandbox/contract.js';
import { SlurmBackend } from '../sandbox/slurm.js';
import { JobManager } from '../src/jobs/job-manager.js';
import { Store } from '../src/store/store.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { defaultLimits, liveOwner, makeSandbox, tempDir } from './helpers/sandbox.js';
import { type LocalSlurm, localSlurmUnavailable, startLocalSlurm } from './helpers/slurm.js';

const unavailable = localSlurmUnavailable();

/** What only the Slurm backend does: GPUs from Slurm's queue across nodes, and the doctor's report. (The contract is test/sandbox.test.ts.) */
describe.skipIf(unavailable)(`Slurm backend on a local two-node cluster${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  let cluster: LocalSlurm;
  let backend: SlurmBackend;
  let sandbox: SandboxInstance;

  beforeAll(async () => {
    cluster = await startLocalSlurm();
    process.env.SLURM_CONF = cluster.conf;
    backend = new SlurmBackend(liveOwner, { sharedRoot: '/tmp' });
    expect(await backend.unavailableReason()).toBeUndefined();
    ({ sandbox } = await makeSandbox({}, backend));
  });

  afterAll(async () => {
    await sandbox?.destroy();
    await backend?.dispose();
    await cluster?.stop();
  });

  it('queues GPU jobs in Slurm across both nodes, says why they wait, and charges GPU time only from when they run', async () => {
    expect(backend.scheduler.maxGpusPerJob()).toBe(cluster.gpusPerNode);
    const home = tempDir('slurm-gpus');
    const store = new Store(join(home, 'store.sqlite'));
    const jobs = new JobManager(store, pino({ level: 'silent' }), liveOwner, undefined, undefined, backend.scheduler);
    store.insertRun({
      id: 'r1',
      task_id: 'micro-gsm8k',
      label: null,
      budget: '{}',
      dir: home,
      sandbox: 'slurm',
      grader_version: 'test',
      owner: liveOwner,
      created_at: Date.now(),
    });
    const total = cluster.nodes.length * cluster.gpusPerNode;
    // One more job than the cluster has GPUs: the last waits in Slurm's queue for a GPU to come free.
    const started = Array.from({ length: total + 1 }, (_, i) =>
      jobs.start({
        runId: 'r1',
        kind: 'training',
        command: `gpu job ${i}`,
        argv: ['/bin/sh', '-c', 'echo "gpus=$CUDA_VISIBLE_DEVICES"; sleep 6'],
        sandbox,
        limits: { ...defaultLimits, memoryBytes: 64 * 2 ** 20 },
        gpuCount: 1,
        charged: true,
        logDir: join(home, 'logs'),
        record: () => undefined,
      }),
    );
    const pendingReasons = new Set<string>();
    const nodes = new Set<string>();
    for (let i = 0; i < 150 && pendingReasons.size === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      for (const job of started) {
        const reason = jobs.waitingReason(job.id);
        if (reason?.startsWith('pending in Slurm (') && reason !== 'pending in Slurm (None)') pendingReasons.add(reason);
      }
    }
    for (let i = 0; i < 50 && nodes.size < cluster.nodes.length; i++) {
      const queue = execFileSync('squeue', ['-h', '-t', 'running', '-o', '%N'], { encoding: 'utf8' });
      for (const node of queue.split('\n').filter(Boolean)) nodes.add(node);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect([...pendingReasons]).toContainEqual(expect.stringMatching(/^pending in Slurm \((Resources|Priority)\)$/));
    expect([...nodes].sort()).toEqual(cluster.nodes);
    const rows = await Promise.all(started.map((job) => jobs.wait(job.id, Number.POSITIVE_INFINITY)));
    for (const row of rows) {
      expect(row.state, `${row.reason}: ${readFileSync(row.log_path, 'utf8')}`).toBe('succeeded');
      expect(row.gpu_s).toBeGreaterThan(5);
    }
    // The job that waited ran as long as the others, but is charged for its running time only.
    const waited = rows.reduce((last, row) => (row.ended_at! > last.ended_at! ? row : last));
    const wall = (waited.ended_at! - waited.created_at) / 1000;
    expect(wall).toBeGreaterThan(11);
    expect(waited.gpu_s).toBeLessThan(wall - 4);
    store.close();
  });

  it('a job whose server died, with no server taking over, ends itself once the heartbeat is stale', async () => {
    // A server of its own in a child process (the built backend), killed with its job running.
    const code = `
      import { SlurmBackend } from ${JSON.stringify(join(packageRoot, 'dist', 'sandbox', 'slurm.js'))};
      import { processStartTime } from ${JSON.stringify(join(packageRoot, 'dist', 'sandbox', 'process-tree.js'))};
      const owner = process.pid + '-' + processStartTime(process.pid);
      const backend = new SlurmBackend(owner, { sharedRoot: '/tmp', orphanAfterSeconds: 3 });
      const sandbox = await backend.create({ name: 'orphan', mounts: [], hidden: [], env: {}, workdir: '/tmp' });
      sandbox.exec({ command: ['sleep', '300'], limits: { cpus: 1, memoryBytes: 64 * 2 ** 20, pids: 16, gpus: [] }, output: { write: () => undefined }, tag: 'orphan' });
      process.stdout.write(owner + '\\n');
      setInterval(() => undefined, 1000);`;
    // From a file, not `-e`: the backend's worker threads inherit the process's flags, and `--input-type` fails a worker's file.
    const script = join(tempDir('slurm-orphan'), 'server.mjs');
    writeFileSync(script, code);
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const owner = await new Promise<string>((resolve, reject) => {
      child.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString().trim()));
      child.once('exit', (code) => reject(new Error(`the server's process exited ${code} before its job started (its stderr is above)`)));
    });
    const running = () =>
      execFileSync('squeue', ['-h', '-t', 'running', '-o', '%j'], { encoding: 'utf8' })
        .split('\n')
        .filter((name) => name.startsWith(`a2rl.${owner}.`));
    for (let i = 0; i < 300 && running().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(running()).toHaveLength(1);
    child.kill('SIGKILL');
    const killedAt = Date.now();
    while (running().length > 0 && Date.now() - killedAt < 60_000) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(running()).toEqual([]);
    // Not before the heartbeat went stale: a server that is only slow keeps its jobs.
    expect(Date.now() - killedAt).toBeGreaterThan(2000);
  });

  it('a2rl run --sandbox slurm: N runs K at once, their child servers told the backend flags (no SLURM_CONF in their environment)', async () => {
    const home = tempDir('slurm-run');
    const replay = join(home, 'replay.jsonl');
    writeFileSync(
      replay,
      [
        { tool: 'budget_status', expect: [{ field: 'compute_measured_by', equals: backend.scheduler.accounting }] },
        {
          tool: 'exec',
          arguments: { command: 'echo on a node' },
          expect: [
            { field: 'exit_code', equals: 0 },
            { field: 'output', equals: 'on a node\n' },
          ],
        },
      ]
        .map((step) => JSON.stringify(step))
        .join('\n'),
    );
    const { SLURM_CONF: _, ...env } = process.env;
    const args = [
      '--home',
      home,
      'run',
      '--task',
      'micro-gsm8k',
      '--json',
      '--agent',
      `replay:${replay}`,
      '--repeats',
      '2',
      '--parallel',
      '2',
    ];
    const launched = spawnSync(
      process.execPath,
      [cliEntry, ...args, '--sandbox', 'slurm', '--shared-root', '/tmp', '--slurm-conf', cluster.conf],
      { encoding: 'utf8', env },
    );
    expect(launched.status, launched.stderr).toBe(0);
    const results = JSON.parse(launched.stdout) as Array<{ run_id: string; exit_code: number }>;
    expect(results.map((r) => r.exit_code)).toEqual([0, 0]);
    const store = new Store(join(home, 'store.sqlite'));
    try {
      for (const { run_id } of results) {
        expect(store.getRun(run_id)!.sandbox).toBe('slurm');
        expect(store.listJobs(run_id, ['exec']).map((job) => job.state)).toEqual(['succeeded']);
      }
    } finally {
      store.close();
    }
  });

  it('a2rl doctor reports the cluster: the backend works, GPUs per job, how compute is measured', () => {
    const doctor = spawnSync(process.execPath, [cliEntry, 'doctor', '--shared-root', '/tmp'], { encoding: 'utf8', env: process.env });
    expect(doctor.stdout).toMatch(/^slurm\tworks; up to 2 GPU\(s\) per job, compute measured by each Slurm job's own cgroup/m);
    const without = spawnSync(process.execPath, [cliEntry, 'doctor'], { encoding: 'utf8', env: { ...process.env, A2RL_SHARED_ROOT: '' } });
    expect(without.stdout).toMatch(/^slurm\tunavailable: no shared root: give --shared-root/m);
  });
});
