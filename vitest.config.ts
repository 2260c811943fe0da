import { defineConfig } from 'vitest/config';

/**
 * The files that train and grade models on CPU most of their time (the full tier's smoke oracles, the Python suites).
 * They form one lane; every other file forms the other, and the two lanes run side by side, each one file at a time:
 * most of the other files wait on processes, sockets and deadlines rather than compute, and CI measured these two at
 * 1.4 and 2 of the 2 cores, so a lane of their own fills what the rest leaves idle without running two trainings of
 * these files against each other. The split keeps the two lanes' CPU-seconds about equal.
 */
const modelLane = ['test/full-tier-smoke.test.ts', 'test/python.test.ts'];

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    // Two lanes at once (projects below); within a lane, files run one at a time.
    maxWorkers: 2,
    fileParallelism: false,
    // A suite marked concurrent (the micro oracles end to end, the Python suites) runs two tests at once: what they run
    // uses one thread, so two side by side nearly halve the wall time on 2 cores. Every oracle trains on one thread:
    // two OpenMP pools of two threads each on 2 cores ran 4 times slower than alone (spinning on each other).
    maxConcurrency: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    projects: [
      { extends: true, test: { name: 'models', include: modelLane } },
      { extends: true, test: { name: 'services', include: ['test/**/*.test.ts'], exclude: modelLane } },
    ],
  },
});
