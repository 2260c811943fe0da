import { describe, expect, it } from 'vitest';
import { GpuAllocator, parseGpuList } from '../src/gpus.js';

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
