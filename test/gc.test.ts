import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceFolder, workspaceImage } from '../sandbox/run-storage.js';
import { notFreed } from '../src/cli/gc.js';
import { Store } from '../src/store/store.js';
import { cliEntry } from '../src/util/paths.js';
import { recordCheckVerdict } from './helpers/integrity.js';
import { tempDir } from './helpers/sandbox.js';

const gc = (home: string, ...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    // No engine at this socket: the Docker part says so and frees nothing, whatever engine this host runs.
    const env = { ...process.env, DOCKER_HOST: `unix://${join(home, 'no-engine.sock')}` };
    execFile(process.execPath, [cliEntry, '--home', home, 'gc', ...args], { env }, (error, stdout, stderr) =>
      resolve({ status: error ? Number((error as { code?: number }).code) : 0, stdout, stderr }),
    );
  });

const mib = 2 ** 20;

describe('a2rl gc on a home with ended and live runs', () => {
  const home = tempDir('gc');
  const dir = (id: string) => join(home, 'runs', id);
  const workspaceFiles = (id: string) => readdirSync(join(dir(id), workspaceFolder));

  beforeAll(() => {
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const run = (id: string, ended: boolean, files: { folder?: number; image?: number }) => {
        mkdirSync(join(dir(id), workspaceFolder), { recursive: true });
        mkdirSync(join(dir(id), 'logs'));
        writeFileSync(join(dir(id), 'logs', 'job-1.log'), 'kept\n');
        if (files.folder) writeFileSync(join(dir(id), workspaceFolder, 'model.bin'), Buffer.alloc(files.folder * mib, 1));
        if (files.image) writeFileSync(join(dir(id), workspaceImage), Buffer.alloc(files.image * mib, 1));
        store.insertRun({
          id,
          task_id: 'micro-gsm8k',
          label: id,
          budget: '{}',
          dir: dir(id),
          sandbox: 'bwrap',
          grader_version: 'test',
          owner: 'gone',
          created_at: Date.now() - 60_000,
        });
        if (ended) store.endRun(id, 'the agent disconnected', Date.now());
      };
      run('ended-walk', true, { folder: 3 });
      run('ended-image', true, { image: 2 });
      run('ended-unchecked', true, { folder: 1 });
      run('live', false, { folder: 1 });
      recordCheckVerdict(store, 'ended-walk');
      recordCheckVerdict(store, 'ended-image');
      // A live run with a verdict (a re-check) is still live: its workspace is in use.
      recordCheckVerdict(store, 'live');
    } finally {
      store.close();
    }
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('--dry-run lists what it would free and frees nothing; gc then frees it and keeps records, scores and live runs', async () => {
    const dry = await gc(home, '--dry-run');
    expect(dry.status, dry.stderr).toBe(0);
    const lines = dry.stdout.trim().split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^skipped\tdocker\tNo Docker engine answered at unix:\/\/\S+ within 5 s/));
    expect(lines).toContain('workspace\tended-walk\twould free 3.0 MiB');
    expect(lines).toContain('workspace\tended-image\twould free 2.0 MiB');
    expect(lines).toContainEqual(expect.stringMatching(/^kept\tended-unchecked\tits contamination check is not recorded yet/));
    expect(dry.stdout).not.toMatch(/\blive\b/);
    expect(lines.at(-1)).toBe('would free 5.0 MiB (dry run: nothing removed)');
    expect(workspaceFiles('ended-walk')).toEqual(['model.bin']);
    expect(existsSync(join(dir('ended-image'), workspaceImage))).toBe(true);

    // Nothing old enough yet: the runs ended just now.
    expect((await gc(home, '--older-than', '7d', '--no-docker')).stdout).toBe('freed 0.0 MiB\n');

    const real = await gc(home, '--no-docker');
    expect(real.status, real.stderr).toBe(0);
    expect(real.stdout).toContain('workspace\tended-walk\tfreed 3.0 MiB\n');
    expect(real.stdout).toContain('workspace\tended-image\tfreed 2.0 MiB\n');
    expect(real.stdout).not.toContain('skipped');
    expect(real.stdout.trim().split('\n').at(-1)).toBe('freed 5.0 MiB');
    expect(workspaceFiles('ended-walk')).toEqual([]);
    expect(existsSync(join(dir('ended-image'), workspaceImage))).toBe(false);
    // What the check still reads, and the live run, are untouched; every run keeps its logs and its record.
    expect(workspaceFiles('ended-unchecked')).toEqual(['model.bin']);
    expect(workspaceFiles('live')).toEqual(['model.bin']);
    for (const id of ['ended-walk', 'ended-image', 'ended-unchecked', 'live'])
      expect(existsSync(join(dir(id), 'logs', 'job-1.log'))).toBe(true);
    const store = new Store(join(home, 'store.sqlite'));
    try {
      expect(
        store
          .listRuns()
          .map((run) => [run.id, run.state])
          .sort(),
      ).toEqual([
        ['ended-image', 'ended'],
        ['ended-unchecked', 'ended'],
        ['ended-walk', 'ended'],
        ['live', 'active'],
      ]);
      expect(store.latestIntegrityCheck('ended-walk', 'contamination')?.verdict).toBe('clean');
    } finally {
      store.close();
    }
    // A second gc finds nothing left.
    expect((await gc(home, '--no-docker')).stdout).toMatch(/^kept\tended-unchecked\t[^\n]+\nfreed 0.0 MiB\n$/);
  });

  it("fails only for what could not be freed for another reason than being in use (the engine's 409)", () => {
    // dockerode's error for an image a container uses, and one for an engine that failed.
    const conflict = Object.assign(new Error('(HTTP code 409) unexpected - conflict'), {
      statusCode: 409,
      json: { message: 'conflict: unable to delete 0123 (cannot be forced) - image is being used by running container 4567\nmore' },
    });
    expect(notFreed(conflict)).toEqual({
      why: 'in use: conflict: unable to delete 0123 (cannot be forced) - image is being used by running container 4567',
      inUse: true,
    });
    expect(notFreed(Object.assign(new Error('(HTTP code 500) server error - no space left on device'), { statusCode: 500 }))).toEqual({
      why: 'not freed: (HTTP code 500) server error - no space left on device',
      inUse: false,
    });
  });

  it('refuses a bad --older-than with what to give instead, and changes nothing', async () => {
    const bad = await gc(home, '--older-than', 'a week');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/Give an age such as 30m, 12h or 7d/);
  });
});
