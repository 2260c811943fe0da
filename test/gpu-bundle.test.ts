import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/util/paths.js';

/**
 * `a2rl prepare --bundle DIR`: the wheels a GPU host's setup installs with no network. A route's lock file needs CUDA
 * wheels no index here serves, so the layout and the offline install are checked with a small lock file of the local
 * index's (--requirements); choosing the route, and refusing where there is none, before anything downloads.
 */
const cli = join(packageRoot, 'dist', 'src', 'cli', 'main.js');
const venvPython = join(packageRoot, '.venv-full', 'bin', 'python');
const scratch = mkdtempSync(join(tmpdir(), 'a2rl-bundle-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const prepare = (...args: string[]) => spawnSync(process.execPath, [cli, 'prepare', ...args], { encoding: 'utf8' });
const nvidiaSmi = spawnSync('nvidia-smi', ['-L']).error === undefined;

describe.skipIf(!existsSync(venvPython))('a2rl prepare --bundle', () => {
  it('writes the lock file’s wheels, the lock file and a manifest; they install with no index', { timeout: 120_000 }, () => {
    const lock = join(scratch, 'lock.txt');
    writeFileSync(lock, 'six==1.17.0\n');
    const bundle = join(scratch, 'bundle');
    const written = prepare('--bundle', bundle, '--requirements', lock);
    expect(written.status, written.stderr).toBe(0);
    expect(readdirSync(join(bundle, 'wheels'))).toEqual(['six-1.17.0-py2.py3-none-any.whl']);
    expect(readFileSync(join(bundle, 'requirements.txt'), 'utf8')).toBe('six==1.17.0\n');
    expect(JSON.parse(readFileSync(join(bundle, 'bundle.json'), 'utf8'))).toMatchObject({
      route: 'custom',
      lock_sha256: createHash('sha256').update('six==1.17.0\n').digest('hex'),
      wheels: 1,
      architecture: process.arch,
    });
    expect(written.stdout).toContain(
      `on the GPU host, with no network: A2RL_WHEELS=${join(bundle, 'wheels')} sh bench/gpu-check.sh offline`,
    );
    // As setup installs from it (A2RL_WHEELS): no index, and one that cannot be reached named anyway.
    const target = join(scratch, 'installed');
    const installed = spawnSync(
      venvPython,
      [
        '-m',
        'pip',
        'install',
        '--no-index',
        '--find-links',
        join(bundle, 'wheels'),
        '--target',
        target,
        '-r',
        join(bundle, 'requirements.txt'),
      ],
      { encoding: 'utf8', env: { ...process.env, PIP_INDEX_URL: 'http://127.0.0.1:9/simple', PIP_FIND_LINKS: '', PIP_RETRIES: '0' } },
    );
    expect(installed.status, installed.stderr).toBe(0);
    expect(existsSync(join(target, 'six.py'))).toBe(true);
  });

  it('refuses a route it does not know, and bundle options without --bundle, before writing anything', () => {
    const bundle = join(scratch, 'refused');
    const unknown = prepare('--bundle', bundle, '--route', 'cu118');
    expect(unknown.status).not.toBe(0);
    expect(unknown.stderr).toContain('--route cu118 is no route; name cu126, cu128, cu130, cpu. Nothing was downloaded.');
    const stray = prepare('gsm8k', '--route', 'cu128');
    expect(stray.stderr).toContain('--route and --requirements go with --bundle DIR; leave them out to prepare a task.');
    const neither = prepare();
    expect(neither.stderr).toContain('Name a full-tier task (a2rl prepare gsm8k), or give --bundle DIR.');
    expect(existsSync(bundle)).toBe(false);
  });

  it.skipIf(nvidiaSmi)('says "no route" on a host without a driver unless the GPU host’s route is named', () => {
    const bundle = join(scratch, 'no-route');
    const result = prepare('--bundle', bundle);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(
      /Nothing was downloaded: no route: nvidia-smi failed or is not installed .*--route cu126, cu128 or cu130/,
    );
    expect(existsSync(bundle)).toBe(false);
  });
});
