import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gradingEnvironment, gradingPids } from '../src/grading/grader.js';
import { loadReplay, playReplay, ReplayFailure } from '../src/launch/replay.js';
import { Store } from '../src/store/store.js';
import { resolveFullTask } from '../src/tasks/full-task.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { fixtureModelId, writeFixtureHub } from './helpers/fixture-hub.js';
import { call, startServer } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';

// What a GPU host needs of the full tier, checked where a check needs no GPU (this host has none): the doctor's GPU
// section, bench/gpu-check.jsonl's GPU request, the grading sandbox's limits and variables, and no silent CPU fallback.
describe('the full tier on a GPU host, without one', () => {
  let hub: string;
  let home: string;

  beforeAll(() => {
    hub = writeFixtureHub();
    home = tempDir('home-gpu');
    const prepared = spawnSync('node', [cliEntry, '--home', home, 'prepare', 'gsm8k', '--from', hub, '--model', fixtureModelId], {
      encoding: 'utf8',
    });
    expect(prepared.status, prepared.stderr).toBe(0);
  });
  afterAll(() => {
    rmSync(hub, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it('a2rl doctor on a host without a GPU says so in one line', () => {
    const doctor = spawnSync(process.execPath, [cliEntry, 'doctor'], { encoding: 'utf8', env: { ...process.env, A2RL_SHARED_ROOT: '' } });
    const gpuLines = doctor.stdout.split('\n').filter((line) => line.startsWith('gpu'));
    expect(gpuLines, doctor.stdout).toHaveLength(1);
    expect(gpuLines[0]).toMatch(
      /^gpu\tno GPU \(nvidia-smi (is not installed|lists none)\): the full tier runs only its CPU smoke profiles here$/,
    );
  });

  it('bench/gpu-check.jsonl checks the GPU with run_training jobs that ask for one, and stops at the first that fails', async () => {
    const replay = loadReplay(join(packageRoot, 'bench', 'gpu-check.jsonl'));
    expect(replay.steps.map((step) => step.tool)).not.toContain('exec'); // exec jobs never hold a GPU
    const jobs = replay.steps.filter((step) => step.tool === 'run_training');
    expect(jobs.map((step) => [step.arguments.command, step.arguments.gpus])).toEqual([
      ['python3 -m hflm.gpu', 1],
      ['python3 code/gpu_check_train.py --out output/gpu-check', 1],
    ]);
    for (const job of jobs) {
      // Each job's end is awaited, its log shown, and the replay stops unless it succeeded.
      const checks = replay.steps.filter((step) => JSON.stringify(step.arguments).includes(`\${${job.save!}.job_id}`));
      expect(checks.map((step) => step.tool)).toEqual(['job_status', 'job_logs', 'job_status']);
      expect(checks[2]!.expect).toEqual([{ field: 'jobs.0.state', equals: 'succeeded' }]);
    }
    const graded = replay.steps.find((step) => step.tool === 'get_score' && step.until?.field === 'submissions.0.state')!;
    expect(graded.until!.in).toEqual(['graded', 'failed']);
    expect(graded.expect).toEqual([{ field: 'submissions.0.state', equals: 'graded' }]);

    // Played against a server without GPUs, it stops at its first line, saying why.
    const client = await startServer({ home: tempDir('home-gpu-check'), task: 'micro-gsm8k' });
    try {
      const played = playReplay(client, replay);
      await expect(played).rejects.toBeInstanceOf(ReplayFailure);
      await expect(played).rejects.toThrow(/^replay line 1 \(run_training\): tool error: .*GPU/);
    } finally {
      await client.close();
    }
  });

  it('a full-tier grading gets an inference engine’s process limit, thread pools sized to its CPUs, and the GPU demand', () => {
    const task = resolveFullTask('gsm8k', home, fixtureModelId);
    expect(gradingPids).toEqual({ micro: 64, full: 4096 });
    const cpuServer = gradingEnvironment({ ...task, grader: { ...task.grader, cpus: 2 } }, 0, {});
    expect(cpuServer).toMatchObject({ RAYON_NUM_THREADS: '2', TOKENIZERS_PARALLELISM: 'true', TORCHINDUCTOR_COMPILE_THREADS: '2' });
    expect(cpuServer.A2RL_REQUIRE_GPU).toBeUndefined();
    expect(gradingEnvironment({ ...task, grader: { ...task.grader, cpus: 0.5 } }, 0, {})).toMatchObject({
      RAYON_NUM_THREADS: '1',
      TOKENIZERS_PARALLELISM: 'false',
    });
    expect(gradingEnvironment(task, 1, {}).A2RL_REQUIRE_GPU).toBe('1');
    expect(gradingEnvironment(task, 0, { A2RL_FULL_GPU: '1' }).A2RL_REQUIRE_GPU).toBe('1');
    // The run's own jobs get pools sized to the task's per-job CPUs (OpenMP's the sandbox sets per job).
    expect(task.pythonRuntime.env).toMatchObject({ RAYON_NUM_THREADS: String(task.jobs.cpus) });
  });

  it('with A2RL_FULL_GPU=1 on a host without a GPU, the baseline grading fails saying why instead of running on CPU', async () => {
    const gpuHome = tempDir('home-forced-gpu');
    const prepared = spawnSync('node', [cliEntry, '--home', gpuHome, 'prepare', 'gsm8k', '--from', hub, '--model', fixtureModelId], {
      encoding: 'utf8',
    });
    expect(prepared.status, prepared.stderr).toBe(0);
    process.env.A2RL_FULL_GPU = '1';
    const client = await startServer({ home: gpuHome, task: 'gsm8k', serverArgs: ['--base-model', fixtureModelId] });
    delete process.env.A2RL_FULL_GPU;
    const store = new Store(join(gpuHome, 'store.sqlite'));
    try {
      const runId = (await call(client, 'budget_status')).structured.run_id as string;
      let grading;
      for (let waited = 0; waited < 120_000; waited += 500) {
        grading = store.listJobs(runId, ['grading'])[0];
        if (grading && grading.state !== 'running') break;
        await sleep(500);
      }
      expect(grading?.state).toBe('failed');
      expect(readFileSync(grading!.log_path, 'utf8')).toMatch(
        /GpuUnavailable: this job was given GPUs but cannot use them, and will not fall back to CPU: .*CPU build; build the GPU runtime on this host: A2RL_FULL_GPU=1 sh scripts\/setup\.sh/,
      );
      expect((await call(client, 'get_score')).structured.baseline.state).toBe('pending');
    } finally {
      store.close();
      await client.close();
      rmSync(gpuHome, { recursive: true, force: true });
    }
  });
});
