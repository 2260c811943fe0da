import { execFileSync } from 'node:child_process';
import { closeSync, ftruncateSync, linkSync, mkdirSync, openSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { diskUsage, maxWalkDepth } from '../src/util/disk-usage.js';
import { tempDir } from './helpers/sandbox.js';

describe('disk usage', () => {
  it('counts allocated bytes: a hard link once, a sparse file by what it holds, nothing behind a symlink', async () => {
    const root = tempDir('du');
    const outside = tempDir('du-outside');
    writeFileSync(join(outside, 'big'), Buffer.alloc(8 * 2 ** 20, 1));
    const empty = (await diskUsage([root])).bytes;
    mkdirSync(join(root, 'output'));
    writeFileSync(join(root, 'output', 'weights'), Buffer.alloc(2 * 2 ** 20, 1));
    const withFile = (await diskUsage([root])).bytes;
    expect(withFile - empty).toBeGreaterThanOrEqual(2 * 2 ** 20);
    expect(withFile - empty).toBeLessThan(2 * 2 ** 20 + 64 * 1024);
    linkSync(join(root, 'output', 'weights'), join(root, 'output', 'same-weights'));
    symlinkSync(join(outside, 'big'), join(root, 'output', 'link'));
    const sparse = openSync(join(root, 'output', 'sparse'), 'w');
    ftruncateSync(sparse, 2 ** 40);
    closeSync(sparse);
    expect((await diskUsage([root])).bytes - withFile).toBeLessThan(64 * 1024);
    // A tree named twice (or inside another) counts once.
    expect((await diskUsage([root, join(root, 'output')])).bytes).toBe((await diskUsage([root])).bytes);
  });

  it('counts files and folders; a tree deleted meanwhile counts nothing', async () => {
    const root = tempDir('du-many');
    for (let i = 0; i < 50; i++) writeFileSync(join(root, `f${i}`), '');
    expect((await diskUsage([root])).entries).toBe(51);
    await expect(diskUsage([join(root, 'missing')])).resolves.toMatchObject({ bytes: 0, entries: 0 });
  });

  it('leaves out names skipped directly under a root (a mounted workspace), and only there', async () => {
    const root = tempDir('du-skip');
    mkdirSync(join(root, 'workspace', 'workspace'), { recursive: true });
    writeFileSync(join(root, 'workspace', 'workspace', 'weights'), Buffer.alloc(2 * 2 ** 20, 1));
    writeFileSync(join(root, 'workspace.img'), Buffer.alloc(2 * 2 ** 20, 1));
    writeFileSync(join(root, 'log'), Buffer.alloc(2 ** 20, 1));
    const all = await diskUsage([root]);
    const skipped = await diskUsage([root], ['workspace', 'workspace.img']);
    expect(skipped.entries).toBe(2);
    expect(skipped.bytes).toBeGreaterThanOrEqual(2 ** 20);
    expect(all.bytes - skipped.bytes).toBeGreaterThanOrEqual(4 * 2 ** 20);
    // The same name deeper down is counted.
    expect((await diskUsage([join(root, 'workspace')], ['workspace.img'])).entries).toBe(3);
  });

  it('counts under paths past PATH_MAX and names that are not UTF-8; nesting past its depth is unmeasured, not skipped', async () => {
    const root = tempDir('du-deep');
    const long = 'd'.repeat(200);
    // 25 levels of 200-byte names: 5,000 bytes of path, more than any one path the kernel takes.
    execFileSync('python3', [
      '-c',
      `import os\nos.chdir('${root}')\nfor _ in range(25): os.mkdir('${long}'); os.chdir('${long}')\nopen(b'w\\xff', 'wb').write(b'1' * 2**20)`,
    ]);
    const deep = await diskUsage([root]);
    expect(deep.unmeasured).toBeUndefined();
    expect(deep.entries).toBe(27);
    expect(deep.bytes).toBeGreaterThanOrEqual(2 ** 20);
    execFileSync('python3', ['-c', `import os\nos.chdir('${root}')\nfor _ in range(${maxWalkDepth}): os.mkdir('n'); os.chdir('n')`]);
    expect((await diskUsage([root])).unmeasured).toMatch(/deeper than 256 levels/);
  });
});
