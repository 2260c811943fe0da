import { closeSync, ftruncateSync, linkSync, mkdirSync, openSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { diskUsage } from '../src/util/disk-usage.js';
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
});
