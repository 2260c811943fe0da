import { spawnSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cgroupsUnavailableReason } from '../sandbox/cgroup.js';
import { cliEntry } from '../src/util/paths.js';

/**
 * `a2rl doctor` as a script uses it: FAILED lines marked, exit 0 without `--require`, exit 1 with one stderr line per
 * required thing that cannot work. Its cgroup v2 lines are checked in a pure-v2 VM (test/cgroup-v2.test.ts).
 */

/** A PATH with bubblewrap and nothing else: prlimit is missing, so the contamination checks cannot run. */
function pathWithoutPrlimit(): string {
  const bin = mkdtempSync(join(tmpdir(), 'a2rl-doctor-bin-'));
  symlinkSync('/usr/bin/bwrap', join(bin, 'bwrap'));
  return bin;
}

function doctor(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [cliEntry, 'doctor', ...args], {
    encoding: 'utf8',
    env: { ...process.env, A2RL_SHARED_ROOT: '', ...env },
  });
}

describe('a2rl doctor', () => {
  const noPrlimit = { PATH: pathWithoutPrlimit() };

  it('marks what cannot work FAILED, names the cgroup version and what it enforces, and still exits 0 without --require', () => {
    const plain = doctor([], noPrlimit);
    expect(plain.stdout).toMatch(/^bwrap\tworks$/m);
    expect(plain.stdout).toMatch(/^checks\tFAILED: prlimit \(util-linux\) is not installed/m);
    if (cgroupsUnavailableReason()) expect(plain.stdout).toMatch(/^limits\tFAILED: no per-job cgroups: /m);
    else
      expect(plain.stdout).toMatch(/^limits\tper job, cgroup v[12] \(.+\): memory\.(limit_in_bytes|max).*, pids\.max; CPU-seconds from /m);
    expect(plain.stderr).toBe('');
    expect(plain.status).toBe(0);
  });

  it('exits 1 with one line per required thing that cannot work, and 0 when all can', () => {
    const failing = doctor(['--require', 'bwrap,checks,gpu,slurm'], noPrlimit);
    expect(failing.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^doctor: required checks cannot work here: prlimit \(util-linux\) is not installed/),
      expect.stringMatching(/^doctor: required gpu cannot work here: gpu: no GPU \(nvidia-smi (is not installed|lists none)\)/),
      expect.stringMatching(/^doctor: required slurm cannot work here: no shared root: give --shared-root/),
    ]);
    expect(failing.status).toBe(1);
    const working = doctor(['--require', cgroupsUnavailableReason() ? 'bwrap,checks,node' : 'bwrap,checks,node,limits']);
    expect(working.stderr).toBe('');
    expect(working.status).toBe(0);
  });

  it('refuses a requirement it does not know, naming those it does, before checking anything', () => {
    const unknown = doctor(['--require', 'limits,gpus']);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr.trim()).toMatch(
      /^(a2rl: )?doctor --require knows no gpus; name some of: bwrap, docker, slurm, limits, gpu, kernel-storage, checks, node\.$/,
    );
    expect(unknown.status).not.toBe(0);
  });
});
