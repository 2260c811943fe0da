import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxInstance } from '../sandbox/contract.js';
import { fullTierRuntimeTarget } from '../src/tasks/full-task.js';
import { packageRoot } from '../src/util/paths.js';
import { makeSandbox, run } from './helpers/sandbox.js';

/**
 * The full tier's console scripts run inside the sandbox, where .venv-full is mounted at /opt/a2rl/venv rather than at
 * its host path: scripts/setup.sh rewrites their shebangs to pip's relocatable form. Before that, `accelerate` was not
 * found there and `torchrun` fell through to Debian's, with Debian's torch 1.13.
 */
const venv = join(packageRoot, '.venv-full');
const missing = existsSync(join(venv, 'bin', 'torchrun')) ? undefined : `${venv} is not built; run scripts/setup.sh full`;

describe.skipIf(missing)('.venv-full in a bubblewrap sandbox', () => {
  let sandbox: SandboxInstance;
  beforeAll(async () => {
    ({ sandbox } = await makeSandbox({
      mounts: [{ source: venv, target: fullTierRuntimeTarget, readOnly: true }],
      env: { PATH: `${fullTierRuntimeTarget}/bin:/usr/local/bin:/usr/bin:/bin`, PYTHONDONTWRITEBYTECODE: '1' },
    }));
  });
  afterAll(async () => {
    await sandbox?.destroy();
  });

  // CPU-bound (each imports torch, about 4 CPU-seconds together): the timeout allows for a loaded machine, nothing is timed.
  it('runs accelerate and torchrun from the venv, with the venv’s torch', { timeout: 300_000 }, async () => {
    const script = [
      'set -e',
      'command -v accelerate && command -v torchrun',
      // accelerate 1.15 has no --version: `env` prints its version and the torch its own interpreter imports.
      `accelerate env | grep -E '^- (\`Accelerate\` version|PyTorch version):'`,
      // Every module Python loads is named under PYTHONVERBOSE: which torch torchrun's interpreter imported.
      'PYTHONVERBOSE=1 torchrun --help 2>/tmp/verbose | head -n 1',
      `grep -m 1 -o '/[^ ]*/torch/__init__.py' /tmp/verbose`,
    ].join('\n');
    const result = await run(sandbox, script, { cpus: 1, memoryBytes: 4 * 2 ** 30, pids: 256, gpus: [] });
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output.trim().split('\n')).toEqual([
      `${fullTierRuntimeTarget}/bin/accelerate`,
      `${fullTierRuntimeTarget}/bin/torchrun`,
      expect.stringMatching(/^- `Accelerate` version: \d+\.\d+\.\d+$/),
      expect.stringMatching(/^- PyTorch version: 2\.13\.0(\+\w+)?$/), // the venv's pin (+cpu, or a CUDA build), not Debian's 1.13
      expect.stringMatching(/^usage: torchrun /),
      `${fullTierRuntimeTarget}/lib/python${pythonMinor()}/site-packages/torch/__init__.py`,
    ]);
  });
});

/** The host Python's minor version (`3.11`), which .venv-full is built with. */
function pythonMinor(): string {
  return spawnSync('/usr/bin/python3', ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' }).stdout.trim();
}
