import { closeSync, ftruncateSync, linkSync, mkdirSync, openSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { diskUsage } from '../src/util/disk-usage.js';
import { tempDir } from './helpers/sandbox.js';

describe('workspace disk usage', () => {
  it('counts allocated bytes: a hard link once, a sparse file by what it holds, nothing behind a symlink', () => {
    const root = tempDir('du');
    const outside = tempDir('du-outside');
    writeFileSync(join(outside, 'big'), Buffer.alloc(8 * 2 ** 20, 1));
    const empty = diskUsage(root).bytes;
    mkdirSync(join(root, 'output'));
    writeFileSync(join(root, 'output', 'weights'), Buffer.alloc(2 * 2 ** 20, 1));
    const withFile = diskUsage(root).bytes;
    expect(withFile - empty).toBeGreaterThanOrEqual(2 * 2 ** 20);
    expect(withFile - empty).toBeLessThan(2 * 2 ** 20 + 64 * 1024);
    linkSync(join(root, 'output', 'weights'), join(root, 'output', 'same-weights'));
    symlinkSync(join(outside, 'big'), join(root, 'output', 'link'));
    const sparse = openSync(join(root, 'output', 'sparse'), 'w');
    ftruncateSync(sparse, 2 ** 40);
    closeSync(sparse);
    expect(diskUsage(root).bytes - withFile).toBeLessThan(64 * 1024);
  });

  it('stops at the most entries it may walk and says so', () => {
    const root = tempDir('du-many');
    for (let i = 0; i < 50; i++) writeFileSync(join(root, `f${i}`), '');
    expect(diskUsage(root, 20)).toMatchObject({ entries: 20, truncated: true });
    expect(diskUsage(root)).toMatchObject({ entries: 51, truncated: false });
  });
});
