import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, type ExpectStatic } from 'vitest';
import { packageRoot, tasksRoot } from '../src/util/paths.js';
import { listTaskIds } from '../src/tasks/task.js';

/**
 * Runs one unittest suite and expects it to pass. Suites run two at a time (describe.concurrent, vitest.config.ts),
 * each with one thread in every pool, so that the two share the cores without OpenMP threads spinning on each other.
 */
async function expectSuitePasses(expect: ExpectStatic, python: string, file: string): Promise<void> {
  const child = spawn(python, [file], {
    env: { ...process.env, OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1', MKL_NUM_THREADS: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const status = await new Promise<number | null>((resolve) => child.once('close', resolve));
  expect(status, stderr).toBe(0);
  expect(stderr).toMatch(/\nOK\b/);
}

// The Python side (microlm, the task packages, generators, graders) has its own unittest suites:
// tasks/contract_test.py, what every task keeps, and each task's tests/test_<id>.py, what is its own.
describe.concurrent('python task suites', () => {
  it('the contract of every task', { timeout: 600_000 }, ({ expect }) =>
    expectSuitePasses(expect, '/usr/bin/python3', join(tasksRoot, 'contract_test.py')),
  );

  it.for(listTaskIds('micro'))('%s', { timeout: 300_000 }, (task, { expect }) =>
    expectSuitePasses(expect, '/usr/bin/python3', join(tasksRoot, task, 'tests', `test_${task.replace(/-/g, '_')}.py`)),
  );

  it('microlm: the cached decoder is greedy decoding token for token, on every base model', { timeout: 300_000 }, ({ expect }) =>
    expectSuitePasses(expect, '/usr/bin/python3', join(tasksRoot, 'microlm', 'test_decode.py')),
  );
});

// The full tier's package (tasks/hflm) runs in its own environment, .venv-full, which scripts/setup.sh
// builds from tasks/hflm/requirements.txt: one suite per tasks/hflm-tests/test_<concept>.py, about 20 s together.
describe.concurrent("python: hflm, the full tier's package", () => {
  const python = join(packageRoot, '.venv-full', 'bin', 'python');
  const testsDir = join(tasksRoot, 'hflm-tests');
  const suites = readdirSync(testsDir)
    .filter((name) => /^test_.*\.py$/.test(name))
    .sort();

  it.for(suites)('%s', { timeout: 300_000 }, async (suite, { expect }) => {
    expect(existsSync(python), `${python} is missing: run \`npm run setup\` (it builds .venv-full)`).toBe(true);
    await expectSuitePasses(expect, python, join(testsDir, suite));
  });
});

// Each full-tier task's own suite (its grader on assets prepared from hflm's fixture hub) runs in .venv-full too.
describe.concurrent('python: the full-tier tasks', () => {
  const python = join(packageRoot, '.venv-full', 'bin', 'python');

  it.for(listTaskIds('full'))('%s', { timeout: 300_000 }, async (task, { expect }) => {
    expect(existsSync(python), `${python} is missing: run \`npm run setup\` (it builds .venv-full)`).toBe(true);
    await expectSuitePasses(expect, python, join(tasksRoot, task, 'tests', `test_${task.replace(/-/g, '_')}.py`));
  });
});
