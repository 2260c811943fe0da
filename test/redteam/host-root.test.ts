import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { lstatSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BubblewrapBackend, bubblewrapArgs, setprivPath } from '../../sandbox/bwrap.js';
import type { SandboxBackend, SandboxInstance } from '../../sandbox/contract.js';
import { DockerBackend } from '../../sandbox/docker.js';
import { jobIdentity, jobIdentityRange } from '../../sandbox/job-identity.js';
import { SlurmBackend } from '../../sandbox/slurm.js';
import { exportRun } from '../../src/reports/export.js';
import { prepareDocker } from '../helpers/docker.js';
import { call, waitScore } from '../helpers/mcp.js';
import { liveOwner, makeSandbox, run, tempDir } from '../helpers/sandbox.js';
import { type LocalSlurm, localSlurmUnavailable, startLocalSlurm } from '../helpers/slurm.js';
import { attack, backends, makeCheckpoint, openForWriting, stdioRun, waitBaseline, withStore } from './harness.js';

// Issue 45: a job must never be host root, host-global kernel settings must stay read-only, and a
// setuid bit a job writes must do nothing and never leave the run. Run on every backend this host has.
const dockerUnavailable = await prepareDocker();
const slurmUnavailable = localSlurmUnavailable();
const isRoot = process.getuid?.() === 0;
const setuidBit = 0o4000;
const setgidBit = 0o2000;

const sandboxBackends: Array<{ name: string; unavailable?: string }> = [
  { name: 'bwrap' },
  { name: 'docker', unavailable: dockerUnavailable },
  { name: 'slurm', unavailable: slurmUnavailable },
];

describe.each(sandboxBackends)('red team, no job is host root ($name)', ({ name, unavailable }) => {
  let cluster: LocalSlurm | undefined;
  let backend: SandboxBackend;
  let sandbox: SandboxInstance;
  let workspace: string;

  beforeAll(async () => {
    if (unavailable) return;
    if (name === 'slurm') {
      cluster = await startLocalSlurm();
      process.env.SLURM_CONF = cluster.conf;
      backend = new SlurmBackend(liveOwner, { sharedRoot: '/tmp' });
    } else backend = name === 'docker' ? new DockerBackend({ owner: liveOwner }) : new BubblewrapBackend(liveOwner);
    ({ sandbox, workspace } = await makeSandbox({}, backend));
  });

  afterAll(async () => {
    await sandbox?.destroy();
    await backend?.dispose();
    await cluster?.stop();
  });

  it.skipIf(unavailable)(
    `opens every file under /proc/sys and /sys for writing, writing nothing: all refused${unavailable ? ` (skipped: ${unavailable})` : ''}`,
    () =>
      attack('host-root', 'kernel settings', name, async () => {
        const probe = await run(sandbox, `python3 -c '${openForWriting.replace(/'/g, `'\\''`)}'`);
        expect(probe.exitCode, probe.output).toBe(0);
        const result = JSON.parse(probe.output.trim().split('\n').at(-1)!) as { tried: number; opened: string[] };
        // /proc/sys alone holds hundreds of settings: the walk saw them.
        expect(result.tried).toBeGreaterThan(100);
        expect(result.opened).toEqual([]);
      }),
  );

  it.skipIf(unavailable || !isRoot)(
    `a file the job writes is owned on the host by the run's own unprivileged uid, neither root's nor the server's${unavailable ? ` (skipped: ${unavailable})` : !isRoot ? ' (skipped: a server that is not root runs jobs as itself)' : ''}`,
    () =>
      attack('host-root', 'job uid', name, async () => {
        const wrote = await run(sandbox, 'echo x > /workspace/owned && chmod u+s,g+s /workspace/owned && id -u');
        expect(wrote.exitCode, wrote.output).toBe(0);
        const stat = statSync(join(workspace, 'owned'));
        expect(stat.uid).not.toBe(0);
        expect(stat.uid).not.toBe(process.getuid!());
        expect(stat.uid).toBe(jobIdentity('test')!.uid);
        expect(stat.uid).toBeGreaterThanOrEqual(jobIdentityRange.first);
        expect(wrote.output.trim()).toBe(String(stat.uid));
        // The bit is on the host's disk (the job owns the file): what the snapshots below must not carry.
        expect(stat.mode & setuidBit).not.toBe(0);
      }),
  );

  it.skipIf(unavailable)(
    `a job has no capabilities, cannot gain any through a setuid file, and cannot make devices${unavailable ? ` (skipped: ${unavailable})` : ''}`,
    () =>
      attack('host-root', 'setuid and devices', name, async () => {
        const probe = await run(
          sandbox,
          'grep -E "^(CapEff|CapPrm|NoNewPrivs)" /proc/self/status; mknod /workspace/null c 1 3 2>/dev/null && echo made-device; grep " /workspace " /proc/self/mountinfo',
        );
        expect(probe.output).toMatch(/CapEff:\s+0000000000000000/);
        expect(probe.output).toMatch(/CapPrm:\s+0000000000000000/);
        // No new privileges: the kernel ignores setuid and setgid bits on exec.
        expect(probe.output).toMatch(/NoNewPrivs:\s+1/);
        expect(probe.output).not.toContain('made-device');
        // Docker's bind mounts take no nosuid/nodev; no_new_privs and no CAP_MKNOD do that work there.
        if (name !== 'docker') expect(probe.output).toMatch(/ \/workspace \S*nosuid,nodev/);
      }),
  );
});

describe('red team, a root bwrap drops to the job uid through a setpriv the job cannot choose', () => {
  it.skipIf(!isRoot)(
    `names setpriv by its absolute system path, never through the job's PATH${isRoot ? '' : ' (skipped: not root)'}`,
    () => {
      const spec = { name: 'setpriv-path', mounts: [], hidden: [], env: { PATH: '/workspace/bin' }, workdir: '/workspace' };
      const args = bubblewrapArgs(spec, { command: ['true'], limits: { cpus: 1, memoryBytes: 2 ** 30, pids: 64, gpus: [] }, env: {} });
      const drop = args.indexOf('--', args.indexOf('--chdir')) + 1;
      expect(args[drop]).toBe(setprivPath);
      expect(setprivPath).toMatch(/^\/(usr\/)?s?bin\/setpriv$/);
      expect(args.slice(drop + 1, drop + 3)).toEqual([
        `--reuid=${jobIdentity('setpriv-path')!.uid}`,
        `--regid=${jobIdentity('setpriv-path')!.gid}`,
      ]);
    },
  );
});

/** Every file and folder under `dir` with a setuid or setgid bit, links not followed. */
function privilegedModes(dir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stat = lstatSync(path);
    if (stat.mode & (setuidBit | setgidBit)) found.push(path);
    if (stat.isDirectory()) found.push(...privilegedModes(path));
  }
  return found;
}

describe.each(backends)('red team, setuid files never leave a run (%s)', (backend) => {
  const home = tempDir('rt-host-root');
  let client: Client;
  let runId: string;
  let workspace: string;

  beforeAll(async () => {
    ({ client, runId, workspace } = await stdioRun(home, backend, { budget: 'submissions=4' }));
    await waitBaseline(client);
  });

  afterAll(async () => {
    await client?.close();
  });

  it('marks its code and checkpoint setuid and setgid; the grader still reads the snapshot, and no snapshot or export carries a bit', () =>
    attack('host-root', 'setuid snapshot', backend, async () => {
      await makeCheckpoint(client, 'output/ckpt', 1.01);
      const marked = await call(client, 'exec', {
        command: 'mkdir -p code && cp /bin/true code/tool && chmod 6755 code/tool && chmod -R ug+s output/ckpt && echo marked',
      });
      expect(marked.structured.output).toContain('marked');
      if (isRoot) expect(statSync(join(workspace, 'code', 'tool')).mode & setuidBit).not.toBe(0);
      // What the server writes for the agent is the run's jobs' too, so a job can change it.
      expect((await call(client, 'write_file', { path: 'code/made/by-tool.py', content: 'x = 1\n' })).isError).toBe(false);
      const edited = await call(client, 'exec', { command: 'echo y >> code/made/by-tool.py && touch code/made/beside && echo edited' });
      expect(edited.structured.output).toContain('edited');
      if (isRoot) {
        const uid = jobIdentity(runId)!.uid;
        expect([statSync(join(workspace, 'code', 'made')).uid, statSync(join(workspace, 'code', 'made', 'by-tool.py')).uid]).toEqual([
          uid,
          uid,
        ]);
      }
      const submitted = await call(client, 'submit_artifact', { path: 'output/ckpt' });
      expect(submitted.isError, submitted.text).toBe(false);
      const graded = await waitScore(client, submitted.structured.submission_id);
      expect(graded.submissions[0].state, JSON.stringify(graded.submissions[0])).toBe('graded');

      expect(privilegedModes(join(home, 'submissions'))).toEqual([]);
      const exported = join(home, 'export');
      withStore(home, (store) => exportRun(store, runId, exported));
      const codeDirs = readdirSync(join(exported, 'code')).filter((entry) => entry !== 'index.json');
      expect(codeDirs.length).toBeGreaterThan(0);
      // The file is there, its bits are not.
      expect(codeDirs.some((tree) => statSync(join(exported, 'code', tree, 'tool'), { throwIfNoEntry: false }))).toBe(true);
      expect(privilegedModes(exported)).toEqual([]);
    }));
});
