import { linkSync, lstatSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { giveWritableMounts, jobIdentity } from '../sandbox/job-identity.js';
import { tempDir } from './helpers/sandbox.js';

describe.skipIf(process.getuid?.() !== 0)("giving a sandbox's writable mounts to its jobs' uid (root only)", () => {
  it('walks off the thread that answers calls, gives what lies in the mount, and follows no link and gives no hard-linked file away', async () => {
    const root = tempDir('give-mounts');
    const [mount, outside] = [join(root, 'workspace'), join(root, 'host')];
    mkdirSync(join(mount, 'code', 'deep'), { recursive: true });
    mkdirSync(outside);
    writeFileSync(join(mount, 'code', 'deep', 'train.py'), 'print(1)');
    for (let i = 0; i < 2000; i++) writeFileSync(join(mount, 'code', `f${i}`), 'x');
    writeFileSync(join(outside, 'secret'), 'host');
    writeFileSync(join(outside, 'linked'), 'host');
    symlinkSync(join(outside, 'secret'), join(mount, 'code', 'to-host'));
    symlinkSync(outside, join(mount, 'host-folder'));
    linkSync(join(outside, 'linked'), join(mount, 'code', 'hard'));
    const spec = {
      name: 'give-mounts-test',
      mounts: [{ source: mount, target: '/workspace', readOnly: false }],
      hidden: [],
      env: {},
      workdir: '/',
    };
    const { uid } = jobIdentity(spec.name)!;

    // The server's event loop turns while the walk runs: a walk on it would finish before any callback could.
    const order: string[] = [];
    setImmediate(() => order.push('the event loop turned'));
    await giveWritableMounts(spec);
    order.push('given');
    expect(order).toEqual(['the event loop turned', 'given']);

    for (const path of ['', 'code', 'code/deep', 'code/deep/train.py', 'code/f1999'])
      expect(statSync(join(mount, path)).uid, path).toBe(uid);
    // Links are given themselves; what they point at, and a file hard-linked from the host, stay the host's.
    expect(lstatSync(join(mount, 'code', 'to-host')).uid).toBe(uid);
    for (const path of ['secret', 'linked', '']) expect(statSync(join(outside, path)).uid, path).toBe(0);
    expect(statSync(join(mount, 'code', 'hard')).uid).toBe(0);
  });

  it('rejects, saying why, where a mount cannot be walked', async () => {
    const spec = {
      name: 'give-mounts-test',
      mounts: [{ source: '/nonexistent/a2rl', target: '/workspace', readOnly: false }],
      hidden: [],
      env: {},
      workdir: '/',
    };
    await expect(giveWritableMounts(spec)).rejects.toThrow(/nonexistent|ENOENT/);
  });
});
