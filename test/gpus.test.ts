import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import type { SandboxInstance } from '../sandbox/contract.js';
import { GpuAllocator, parseGpuList } from '../src/jobs/gpu-allocator.js';
import { type JobRequest, JobManager } from '../src/jobs/job-manager.js';
import { createLogger } from '../src/util/logger.js';
import { Store } from '../src/store/store.js';
import { defaultLimits, liveOwner, tempDir } from './helpers/sandbox.js';

/** Resolves with what the promise gave, or 'pending' when it has not settled after the queued callbacks ran. */
async function settled<T>(promise: Promise<T>): Promise<T | 'pending'> {
  return Promise.race([promise, new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), 10))]);
}

describe('GPU allocator', () => {
  it('hands jobs whole GPUs and queues a request until enough are released', async () => {
    const gpus = new GpuAllocator([0, 1, 2]);
    expect(gpus.poolSize('jobs')).toBe(2);
    expect(await gpus.acquire('jobs', 1)).toEqual([0]);
    const second = gpus.acquire('jobs', 2);
    expect(await settled(second)).toBe('pending');
    expect(gpus.waiting('jobs')).toBe(1);
    gpus.release([0]);
    expect(await second).toEqual([0, 1]);
    expect(gpus.waiting('jobs')).toBe(0);
  });

  it('serves requests in order: a large one at the head is not overtaken by a small one', async () => {
    const gpus = new GpuAllocator([0, 1, 2]);
    const first = await gpus.acquire('jobs', 1);
    const large = gpus.acquire('jobs', 2);
    const small = gpus.acquire('jobs', 1);
    expect(await settled(small)).toBe('pending');
    gpus.release(first);
    expect(await large).toEqual([0, 1]);
    expect(await settled(small)).toBe('pending');
  });

  it('keeps a GPU for grading: training never holds it and grading never takes the others', async () => {
    const gpus = new GpuAllocator([0, 1, 2, 3]);
    expect(await gpus.acquire('jobs', 3)).toEqual([0, 1, 2]);
    expect(await gpus.acquire('grading', 1)).toEqual([3]);
    const nextGrading = gpus.acquire('grading', 1);
    expect(await settled(nextGrading)).toBe('pending');
    // A training GPU coming free does not go to grading...
    gpus.release([0]);
    expect(await settled(nextGrading)).toBe('pending');
    // ...the grading GPU does.
    gpus.release([3]);
    expect(await nextGrading).toEqual([3]);
    expect(() => gpus.acquire('jobs', 4)).toThrow(/3 GPU\(s\) for training and rollouts/);
  });

  it('shares a single GPU, serving a waiting grading before waiting training jobs', async () => {
    const gpus = new GpuAllocator([5]);
    const held = await gpus.acquire('jobs', 1);
    const training = gpus.acquire('jobs', 1);
    const grading = gpus.acquire('grading', 1);
    gpus.release(held);
    expect(await grading).toEqual([5]);
    expect(await settled(training)).toBe('pending');
    gpus.release([5]);
    expect(await training).toEqual([5]);
  });

  it('refuses what cannot be right: bad counts, double releases, bad lists', async () => {
    const gpus = new GpuAllocator([0, 1]);
    expect(() => gpus.acquire('jobs', 0)).toThrow(/at least 1/);
    expect(() => gpus.release([0])).toThrow(/released twice/);
    expect(() => new GpuAllocator([]).acquire('grading', 1)).toThrow(/0 GPU\(s\) for grading/);
    expect(parseGpuList('0, 2')).toEqual([0, 2]);
    expect(() => parseGpuList('0,x')).toThrow(/e\.g\. --gpus 0,1/);
    expect(() => parseGpuList('1,1')).toThrow(/twice/);
  });
});

describe('GPU jobs in the job manager', () => {
  const home = tempDir('gpu-jobs');
  const store = new Store(join(home, 'store.sqlite'));
  const jobs = new JobManager(store, createLogger().logger, 'test', new GpuAllocator([0, 1, 2]));
  store.insertRun({
    id: 'r1',
    task_id: 'micro-gsm8k',
    label: null,
    grader_version: 'test',
    owner: 'test',
    budget: '{}',
    dir: home,
    sandbox: 'bwrap',
    created_at: Date.now(),
  });
  /** The GPUs each started job was handed, in start order. This host has none, so the real sandbox runs the job without devices. */
  const handed: Array<{ command: string; gpus: number[] }> = [];
  let sandbox: SandboxInstance;

  afterAll(async () => {
    await jobs.stopAll('test over');
    await sandbox?.destroy();
    store.close();
  });

  const start = async (kind: JobRequest['kind'], command: string, gpuCount: number) => {
    sandbox ??= await new BubblewrapBackend(liveOwner).create({
      name: 'gpu',
      mounts: [{ source: tempDir('ws'), target: '/workspace', readOnly: false }],
      hidden: [],
      env: {},
      workdir: '/workspace',
    });
    const recording: SandboxInstance = {
      spec: sandbox.spec,
      exec: (options) => {
        handed.push({ command, gpus: options.limits.gpus });
        return sandbox.exec({ ...options, limits: { ...options.limits, gpus: [] } });
      },
      destroy: () => sandbox.destroy(),
    };
    return jobs.start({
      runId: 'r1',
      kind,
      command,
      argv: ['/bin/sh', '-c', command],
      sandbox: recording,
      limits: defaultLimits,
      gpuCount,
      charged: kind !== 'grading',
      logDir: join(home, 'logs'),
      record: () => undefined,
    });
  };

  it('queues a job until its GPUs are free, charges GPU-seconds from the grant, and lets grading use its own GPU meanwhile', async () => {
    const first = await start('training', 'sleep 1.5', 2);
    const second = await start('training', 'true', 1);
    const withdrawn = await start('training', 'true', 2);
    const grading = await start('grading', 'true', 1);
    expect((await jobs.wait(grading.id, Number.POSITIVE_INFINITY)).state).toBe('succeeded');
    // While the first holds both training GPUs, only it and the grading have started.
    expect(handed).toEqual([
      { command: 'sleep 1.5', gpus: [0, 1] },
      { command: 'true', gpus: [2] },
    ]);
    expect((await jobs.stop(withdrawn.id, 'cancelled', 'test')).state).toBe('cancelled');
    const firstDone = await jobs.wait(first.id, Number.POSITIVE_INFINITY);
    const secondDone = await jobs.wait(second.id, Number.POSITIVE_INFINITY);
    expect(secondDone.state).toBe('succeeded');
    expect(handed.slice(2)).toEqual([{ command: 'true', gpus: [0] }]);
    expect(firstDone.gpu_s).toBeGreaterThanOrEqual(2 * 1.5);
    // The second waited about 1.5 s for its GPU but ran briefly: the wait is not charged.
    expect(secondDone.gpu_s).toBeLessThan(1);
    expect(store.getJob(withdrawn.id)).toMatchObject({ state: 'cancelled', gpu_s: 0 });
    expect(store.usage('r1').computeSeconds).toBeCloseTo(firstDone.gpu_s + secondDone.gpu_s, 5);
  });
});
