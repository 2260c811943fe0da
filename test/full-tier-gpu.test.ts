import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecOptions, SandboxBackend, SandboxSpec } from '../sandbox/contract.js';
import { createBackend } from '../sandbox/registry.js';
import { ownerOfThisProcess } from '../src/core/ownership.js';
import { gradingEnvironment, gradingPids } from '../src/grading/grader.js';
import { loadReplay, playReplay, ReplayFailure } from '../src/launch/replay.js';
import { Store } from '../src/store/store.js';
import { resolveFullTask } from '../src/tasks/full-task.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { fixtureModelId, writeFixtureHub } from './helpers/fixture-hub.js';
import { call, startServer, waitJob } from './helpers/mcp.js';
import { startInProcess } from './helpers/in-process.js';
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
    // So does a failed baseline: get_score says it failed (and why), so the replay stops instead of waiting out its hour.
    const baseline = replay.steps.find((step) => step.tool === 'get_score' && step.until?.field === 'baseline.state')!;
    expect(baseline.until!.in).toEqual(['graded', 'failed']);
    expect(baseline.expect).toEqual([{ field: 'baseline.state', equals: 'graded' }]);

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

  it('a full-tier grading gets an inference engine’s process limit, thread pools sized to its CPUs, and the GPU demand', async () => {
    const task = await resolveFullTask('gsm8k', home, fixtureModelId);
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

  it('on a server with GPUs, a full-tier rollout batch and grading each hold one and must decode on it', async () => {
    // GPUs faked as test/gpus.test.ts does: the server's pool has two, each exec is recorded, then run without devices.
    const specs: SandboxSpec[] = [];
    const execs: ExecOptions[] = [];
    const bwrap = createBackend('bwrap', ownerOfThisProcess());
    const backend: SandboxBackend = {
      name: bwrap.name,
      unavailableReason: () => bwrap.unavailableReason(),
      hostCheck: () => bwrap.hostCheck(),
      sweep: (alive) => bwrap.sweep(alive),
      dispose: () => bwrap.dispose(),
      async create(spec) {
        specs.push(spec);
        const sandbox = await bwrap.create(spec);
        return {
          spec: sandbox.spec,
          destroy: () => sandbox.destroy(),
          exec: (options) => {
            execs.push(options);
            return sandbox.exec({ ...options, limits: { ...options.limits, gpus: [] } });
          },
        };
      },
    };
    const served = await startInProcess({ home, task: 'gsm8k', baseModel: fixtureModelId, backend, engine: { gpus: [0, 1] } });
    try {
      const refused = await call(served.client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2, gpus: 0 });
      expect(refused.isError).toBe(true);
      expect(refused.text).toMatch(
        /^\[INVALID_INPUT\] On this server gsm8k's rollouts sample on a GPU \(it has 1 per job\): ask for gpus: 1 to 1, or leave gpus out for 1\./,
      );
      const launched = await call(served.client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2 });
      expect(launched.isError, launched.text).toBe(false);
      const batch = await waitJob(served.client, launched.structured.job_id as string, 120);
      const sampler = execs.find((options) => options.command.includes('hflm.rollouts'))!;
      expect(sampler.limits.gpus).toEqual([0]); // training and rollouts' GPU; grading keeps the other
      expect(sampler.env).toMatchObject({ A2RL_REQUIRE_GPU: '1' });
      // Run here without the device, it fails saying why rather than sample on CPU.
      expect(batch.state).toBe('failed');
      expect((await call(served.client, 'job_logs', { job_id: launched.structured.job_id })).text).toMatch(/error: GPU unavailable: /);
      // The baseline's grading holds the grading GPU, and is told to decode on it.
      await served.engine.grader.drain();
      const gradingSpec = specs.find((spec) => spec.grading)!;
      expect(gradingSpec.env).toMatchObject({ A2RL_REQUIRE_GPU: '1' });
      expect(
        execs.find((options) => options.tag.startsWith('job-') && options.command.some((arg) => arg.endsWith('grade.py')))?.limits.gpus,
      ).toEqual([1]);
    } finally {
      await served.close();
    }
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
      // Polled as an agent would: get_score says pending while the baseline grades.
      let score = await call(client, 'get_score');
      for (let waited = 0; score.structured.baseline.state === 'pending' && waited < 120_000; waited += 500) {
        await sleep(500);
        score = await call(client, 'get_score');
      }
      const reason =
        /grading failed: GPU unavailable: this job was given GPUs but cannot use them, and will not fall back to CPU: .*CPU build; build the GPU runtime on this host: A2RL_FULL_GPU=1 sh scripts\/setup\.sh/;
      expect(score.structured.baseline).toMatchObject({ state: 'failed', error: expect.stringMatching(reason) });
      expect(score.structured.baseline.score).toBeUndefined();
      expect(score.text).toMatch(/^baseline: failed \(the grader could not score this checkpoint \(exit code 3\): .*GPU unavailable/m);
      // The grading job failed, and its log ends with the same reason.
      const grading = store.listJobs(runId, ['grading'])[0]!;
      expect(grading.state).toBe('failed');
      expect(readFileSync(grading.log_path, 'utf8').trim().split('\n').at(-1)).toMatch(reason);

      // The agent's rollouts obey the same rule: the batch fails at once, saying why, instead of sampling on CPU.
      const launched = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2 });
      expect(launched.isError, launched.text).toBe(false);
      const batch = await waitJob(client, launched.structured.job_id as string, 120);
      expect(batch.state).toBe('failed');
      const log = await call(client, 'job_logs', { job_id: launched.structured.job_id });
      expect(log.text).toMatch(
        /error: GPU unavailable: this job was given GPUs but cannot use them, and will not fall back to CPU: .*CPU build/,
      );
      expect(log.text).not.toMatch(/rollouts: \d+\/\d+ groups/); // nothing was sampled
    } finally {
      store.close();
      await client.close();
      rmSync(gpuHome, { recursive: true, force: true });
    }
  });
});
