import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot, tasksRoot } from '../src/util/paths.js';
import { listTaskIds } from '../src/tasks/task.js';

// The Python side (microlm, the task packages, generators, graders) has its own unittest suites:
// tasks/contract_test.py, what every task keeps, and each task's tests/test_<id>.py, what is its own.
describe('python task suites', () => {
  it('the contract of every task', { timeout: 600_000 }, () => {
    const result = spawnSync('/usr/bin/python3', [join(tasksRoot, 'contract_test.py')], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/\nOK\b/);
  });

  it.each(listTaskIds('micro'))('%s', { timeout: 300_000 }, (task) => {
    const result = spawnSync('/usr/bin/python3', [join(tasksRoot, task, 'tests', `test_${task.replace(/-/g, '_')}.py`)], {
      encoding: 'utf8',
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/\nOK\b/);
  });

  it('microlm: the cached decoder is greedy decoding token for token, on every base model', { timeout: 300_000 }, () => {
    const result = spawnSync('/usr/bin/python3', [join(tasksRoot, 'microlm', 'test_decode.py')], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/\nOK\b/);
  });
});

// The full tier's package (tasks/hflm) runs in its own environment, .venv-full, which scripts/setup.sh
// builds from tasks/hflm/requirements.txt: one suite per tests/test_<concept>.py, about 10 s together.
describe("python: hflm, the full tier's package", () => {
  const python = join(packageRoot, '.venv-full', 'bin', 'python');
  const testsDir = join(tasksRoot, 'hflm', 'tests');
  const suites = readdirSync(testsDir)
    .filter((name) => /^test_.*\.py$/.test(name))
    .sort();

  it.each(suites)('%s', { timeout: 120_000 }, (suite) => {
    expect(existsSync(python), `${python} is missing: run \`npm run setup\` (it builds .venv-full)`).toBe(true);
    const result = spawnSync(python, [join(testsDir, suite)], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/\nOK\b/);
  });
});

// Each full-tier task's own suite (its grader on assets prepared from hflm's fixture hub) runs in .venv-full too.
describe('python: the full-tier tasks', () => {
  const python = join(packageRoot, '.venv-full', 'bin', 'python');

  it.each(listTaskIds('full'))('%s', { timeout: 300_000 }, (task) => {
    expect(existsSync(python), `${python} is missing: run \`npm run setup\` (it builds .venv-full)`).toBe(true);
    const result = spawnSync(python, [join(tasksRoot, task, 'tests', `test_${task.replace(/-/g, '_')}.py`)], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/\nOK\b/);
  });
});
