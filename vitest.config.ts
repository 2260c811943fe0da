import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Sandboxed training and grading need both cores: files run one at a time.
    fileParallelism: false,
    // A suite marked concurrent (the micro oracles end to end, the Python suites) runs two tests at once: what they
    // run uses one thread, so two side by side nearly halve the wall time on 2 cores. Not the full tier's smoke runs:
    // two TRL jobs of two OpenMP threads each on 2 cores ran 4 times slower than alone (spinning on each other).
    maxConcurrency: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
