import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createWorkspaceImage,
  kernelStorageUnavailable,
  mountWorkspace,
  unmountStaleWorkspaces,
  unmountWorkspace,
  workspaceFolder,
  workspaceImage,
  workspaceMounted,
  withMountLock,
} from '../../sandbox/run-storage.js';
import { recordIncompleteContaminationCheck } from '../../src/integrity/check.js';
import { cliEntry } from '../../src/util/paths.js';
import { call } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import {
  attack,
  backends,
  connectHttp,
  createHttpRun,
  type HttpServer,
  killServer,
  recordFigure,
  sleep,
  startHttpServer,
  withStore,
} from './harness.js';

/** Small, so each attack reaches it in a second or two. */
const quotaMiB = 40;
const quotaBytes = quotaMiB * 2 ** 20;
/** Where the kernel cannot hold a run's storage (not root, no loop devices) the walk does, and its own tests cover it. */
const noKernelQuota = kernelStorageUnavailable();

const cli = (home: string, ...args: string[]) =>
  promisify(execFile)(process.execPath, [cliEntry, ...args], { env: { ...process.env, A2RL_HOME: home } }).catch(
    (error: { stdout: string; stderr: string }) => ({ stdout: error.stdout, stderr: error.stderr, failed: true }),
  );

/** The mount points under a folder, as this host's kernel lists them. */
const mountsUnder = (dir: string) =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.startsWith(`${dir}/`));

/** Each attack, in a run of its own, as a Python script whose last line is the errno that stopped it. */
const attacks = {
  'fallocate 2 GiB': `import subprocess
r = subprocess.run(["fallocate", "-l", "2G", "output/big"], capture_output=True, text=True)
print(r.stderr.strip())`,
  'a sparse 2 GiB file, its holes written': `import errno, os
fd = os.open("output/sparse", os.O_WRONLY | os.O_CREAT)
os.ftruncate(fd, 2 * 2**30)
block = b"\\1" * 2**20
try:
    for offset in range(0, 2 * 2**30, 2**20): os.pwrite(fd, block, offset)
    print("written")
except OSError as e:
    print(errno.errorcode[e.errno])`,
  '100,000 small files': `import errno, os
os.mkdir("output/many")
try:
    for i in range(100_000): open(f"output/many/{i}", "w").write("x")
    print("written")
except OSError as e:
    print(i, errno.errorcode[e.errno])`,
  // The job trace's folder lies in the workspace: nothing writable from the sandbox lies outside the run's filesystem.
  'fallocate 2 GiB in the job trace folder': `import os, subprocess
os.makedirs(os.environ["JOB_TRACE_DIR"], exist_ok=True)
assert os.environ["JOB_TRACE_DIR"].startswith("/workspace/") and not os.path.exists("/a2rl/traces")
r = subprocess.run(["fallocate", "-l", "2G", os.environ["JOB_TRACE_DIR"] + "/big"], capture_output=True, text=True)
print(r.stderr.strip())`,
  'a path past PATH_MAX': `import errno, os
os.chdir("output")
depth = 0
try:
    while True:
        os.mkdir("d" * 200); os.chdir("d" * 200); depth += 1
except OSError as e:
    print(depth * 201, errno.errorcode[e.errno])`,
} as const;

describe.skipIf(noKernelQuota !== undefined).each(backends)('red team, the kernel holds each run to its disk quota (%s)', (backend) => {
  const home = tempDir('rt-disk-quota');
  let server: HttpServer | undefined;
  const runs: Array<{ name: keyof typeof attacks; runId: string; client: Client }> = [];

  beforeAll(async () => {
    const created = [];
    for (const name of Object.keys(attacks) as Array<keyof typeof attacks>) created.push({ name, ...(await createHttpRun(home)) });
    server = await startHttpServer(home, backend, ['--disk-quota', String(quotaMiB)]);
    for (const run of created) runs.push({ name: run.name, runId: run.run_id, client: await connectHttp(server.url, run.token) });
  });

  afterAll(async () => {
    for (const { client } of runs) await client.close().catch(() => undefined);
    if (server) await killServer(server);
  });

  it('refuses fallocate, filled holes, many files and deep paths inside the job at the quota, and the figures show it', () =>
    attack('disk-quota', 'kernel-held quota', backend, async () => {
      for (const { name, runId, client } of runs) {
        await call(client, 'write_file', { path: 'code/attack.py', content: attacks[name] });
        const ran = await call(client, 'exec', { command: 'python3 code/attack.py' });
        expect(ran.isError, ran.text).toBe(false);
        const said = (ran.structured.output as string).trim().split('\n').at(-1)!;
        expect(said, name).toMatch(/ENOSPC|EDQUOT|No space left on device|Disk quota exceeded/);
        if (name === 'a path past PATH_MAX') expect(Number(said.split(' ')[0]), said).toBeGreaterThan(4096);
        const image = join(home, 'runs', runId, workspaceImage);
        // The host gave the run no more than its image: its size is the quota, and what it holds on disk is less.
        expect(statSync(image).size).toBe(quotaBytes);
        expect(statSync(image).blocks * 512).toBeLessThanOrEqual(quotaBytes);
        // fallocated blocks are never written, yet the kernel's figure counts them; files and folders run out of inodes first.
        const filled = name === '100,000 small files' || name === 'a path past PATH_MAX' ? 4 * 2 ** 20 : 30 * 2 ** 20;
        // The figure is measured every second in the background: the first one after the job, however slow the machine.
        let disk = (await call(client, 'budget_status')).structured.disk_bytes;
        for (const deadline = Date.now() + 60_000; disk.used <= filled && Date.now() < deadline; await sleep(200)) {
          disk = (await call(client, 'budget_status')).structured.disk_bytes;
        }
        expect(disk.limit).toBe(quotaBytes);
        expect(disk.used, name).toBeGreaterThan(filled);
        expect(disk.used, name).toBeLessThanOrEqual(quotaBytes + 2 ** 20);
        const storage = withStore(home, (store) => store.listEvents(runId, 'run').find((event) => event.name === 'storage'));
        expect(JSON.parse(storage!.data)).toMatchObject({ enforcement: 'kernel', image_bytes: quotaBytes });
        recordFigure({
          kind: 'disk_quota_kernel',
          backend,
          attack: name,
          said,
          disk_used: disk.used,
          image_allocated: statSync(image).blocks * 512,
        });
      }
      // The agent clears its space with exec, as it would under the walk; then writes work again.
      const { client } = runs[0]!;
      expect((await call(client, 'write_file', { path: 'code/more.txt', content: 'x'.repeat(2 ** 20) })).text).toMatch(
        /^\[QUOTA_EXCEEDED\] The workspace is full/,
      );
      expect((await call(client, 'exec', { command: 'rm output/big' })).structured.exit_code).toBe(0);
      expect((await call(client, 'write_file', { path: 'code/more.txt', content: 'x' })).isError).toBe(false);
    }));

  it("keeps an ended run's image, unmounted, when its server closes; runs clean frees it and keeps the record", () =>
    attack('disk-quota', 'space kept and freed by policy', backend, async () => {
      const [ended, active] = [runs[0]!, runs[1]!];
      await cli(home, 'runs', 'revoke', ended.runId);
      const refused = await cli(home, 'runs', 'clean', active.runId);
      expect(refused.stderr).toMatch(/Run \S+ is active and uses its workspace; end it first/);
      // The live server unmounts the ended run's image once its check is recorded (its loop device goes back), and
      // keeps the active run's mounted.
      const endedWorkspace = join(home, 'runs', ended.runId, 'workspace');
      const checked = () => withStore(home, (store) => store.latestIntegrityCheck(ended.runId, 'contamination'));
      for (const deadline = Date.now() + 120_000; (!checked() || mountsUnder(home).includes(endedWorkspace)) && Date.now() < deadline;) {
        await sleep(200);
      }
      expect(checked()?.verdict).toBeDefined();
      expect(mountsUnder(home)).not.toContain(endedWorkspace);
      expect(mountsUnder(home)).toContain(join(home, 'runs', active.runId, 'workspace'));
      expect(server!.child.exitCode).toBeNull();
      // A graceful stop: the contamination check of the ended run is recorded, then every workspace unmounted.
      server!.child.kill('SIGTERM');
      await server!.exited;
      server = undefined;
      expect(mountsUnder(home)).toEqual([]);
      const image = join(home, 'runs', ended.runId, workspaceImage);
      expect(statSync(image).size).toBe(quotaBytes);
      const verdict = withStore(home, (store) => store.latestIntegrityCheck(ended.runId, 'contamination'));
      expect(verdict?.verdict).toBeDefined();
      // A check its server interrupted is no verdict: the image stays for the check that redoes it.
      withStore(home, (store) =>
        recordIncompleteContaminationCheck(store, ended.runId, { reason: 'the server stopped', elapsedMs: 1, interrupted: true }),
      );
      expect((await cli(home, 'runs', 'clean', ended.runId)).stderr).toMatch(/recorded only as interrupted/);
      expect(existsSync(image)).toBe(true);
      // The check reads the unmounted image again on demand (mounted read-only for it, then unmounted).
      const rechecked = await cli(home, 'runs', 'check', ended.runId);
      expect(rechecked).not.toHaveProperty('failed');
      expect(mountsUnder(home)).toEqual([]);
      const cleaned = await cli(home, 'runs', 'clean', ended.runId);
      expect(cleaned.stdout).toMatch(/freed \d+ MiB/);
      expect(existsSync(image)).toBe(false);
      expect(withStore(home, (store) => store.getRun(ended.runId)?.state)).toBe('ended');
      expect(existsSync(join(home, 'runs', active.runId, workspaceImage))).toBe(true);
    }));
});

describe.skipIf(noKernelQuota !== undefined)("a killed server's mount, recovered while another server adopts its run", () => {
  const home = tempDir('rt-mount-race');
  const runDir = join(home, 'runs', 'adopted');

  afterAll(async () => {
    await unmountWorkspace(runDir);
  });

  it('stays mounted for the adopter: a mount and a stale unmount never interleave, and recovery asks again under the lock', async () => {
    mkdirSync(join(runDir, workspaceFolder), { recursive: true });
    await createWorkspaceImage(runDir, 8 * 2 ** 20);
    expect(workspaceMounted(runDir)).toBe(true);
    // The killed server's run: no live owner, so a starting server's recovery takes its mount for stale.
    let adopted = false;
    const recovery = unmountStaleWorkspaces(home, () => adopted);
    // Meanwhile another server adopts the run: it claims it (its owner is now alive), then mounts its workspace, which
    // it may find mounted still. Recovery found the owner dead a moment before: it must not take the adopter's mount.
    adopted = true;
    const adoption = mountWorkspace(runDir);
    await Promise.all([recovery, adoption]);
    expect(workspaceMounted(runDir)).toBe(true);
    // The adopter holds the run's mount lock (claimed, mounting) when recovery, which found no live owner, reaches it.
    adopted = false;
    let mounted!: () => void;
    const adopter = withMountLock(runDir, () => new Promise<void>((resolve) => (mounted = resolve)));
    const recoveryAgain = unmountStaleWorkspaces(home, () => adopted);
    adopted = true;
    mounted();
    await Promise.all([adopter, recoveryAgain]);
    expect(workspaceMounted(runDir)).toBe(true);
    // Nobody adopted: recovery unmounts it.
    adopted = false;
    await unmountStaleWorkspaces(home, () => adopted);
    expect(workspaceMounted(runDir)).toBe(false);
  });
});
