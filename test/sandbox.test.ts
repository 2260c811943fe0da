import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import { cgroupsUnavailableReason, slowCgroupMovesReason } from '../sandbox/cgroup.js';
import { DockerBackend } from '../sandbox/docker.js';
import type { SandboxBackend, SandboxInstance, SandboxProcess } from '../sandbox/contract.js';
import { jobIdentity } from '../sandbox/job-identity.js';
import { SlurmBackend } from '../sandbox/slurm.js';
import { prepareDocker } from './helpers/docker.js';
import { localSlurmUnavailable, startLocalSlurm } from './helpers/slurm.js';
import { defaultLimits, liveOwner, makeSandbox, run, tempDir } from './helpers/sandbox.js';

// Limits and CPU accounting need writable cgroup v1 controllers; elsewhere those tests are skipped, not failed.
const noCgroups = cgroupsUnavailableReason() !== undefined;

// A real two-node Slurm cluster on this host; the test folders under /tmp stand for the shared filesystem.
const slurmUnavailable = localSlurmUnavailable();
const slurm = slurmUnavailable ? undefined : await startLocalSlurm();
if (slurm) process.env.SLURM_CONF = slurm.conf;
afterAll(async () => {
  await slurm?.stop();
});

/** Every backend runs the same contract; Docker and Slurm only where they can be started (always on CI). */
const backends: Array<{ name: string; unavailable?: string; create: () => SandboxBackend; root: string[] }> = [
  {
    name: 'bubblewrap',
    create: () => new BubblewrapBackend(liveOwner),
    root: ['bin', 'dev', 'etc', 'lib', 'lib64', 'proc', 'sbin', 'tmp', 'usr', 'workspace'],
  },
  {
    name: 'docker',
    unavailable: await prepareDocker(),
    create: () => new DockerBackend({ owner: liveOwner }),
    // The image's own root (Debian minbase), not the host's.
    root: [
      'bin',
      'boot',
      'dev',
      'etc',
      'home',
      'lib',
      'lib64',
      'media',
      'mnt',
      'opt',
      'proc',
      'root',
      'run',
      'sbin',
      'srv',
      'sys',
      'tmp',
      'usr',
      'var',
      'workspace',
    ],
  },
  {
    name: 'slurm',
    unavailable: slurmUnavailable,
    create: () => new SlurmBackend(liveOwner, { sharedRoot: tmpdir() }),
    root: ['bin', 'dev', 'etc', 'lib', 'lib64', 'proc', 'sbin', 'tmp', 'usr', 'workspace'],
  },
];

/** Host processes whose command line holds `marker` and that are not zombies. */
function liveProcessesWith(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe.each(backends)('$name sandbox', ({ name, unavailable, create, root }) => {
  if (unavailable) {
    it.skip(`skipped: ${unavailable}`, () => undefined);
    return;
  }
  let backend: SandboxBackend;
  let sandbox: SandboxInstance;
  let workspace: string;
  let secretDir: string;
  let readOnlyData: string;

  beforeAll(async () => {
    secretDir = tempDir('secret');
    writeFileSync(join(secretDir, 'eval.jsonl'), '{"answer": "#### 42"}\n');
    readOnlyData = tempDir('data');
    writeFileSync(join(readOnlyData, 'train.jsonl'), 'train\n');
    backend = create();
    ({ sandbox, workspace } = await makeSandbox(
      { mounts: [{ source: readOnlyData, target: '/workspace/data', readOnly: true }] },
      backend,
    ));
    mkdirSync(join(workspace, 'data'), { recursive: true });
  });

  afterAll(async () => {
    await sandbox.destroy();
  });

  it('runs python with torch, as an unprivileged user, in /workspace', async () => {
    const result = await run(sandbox, '/usr/bin/python3 -c "import os, torch; print(os.getuid(), os.getcwd(), torch.__version__)"');
    expect(result).toMatchObject({ exitCode: 0 });
    // A root server's jobs run as the sandbox's own uid (sandbox/job-identity.ts); another's, as it (1000 in bwrap's user namespace).
    const uid = jobIdentity('test')?.uid ?? (name === 'docker' ? process.getuid!() : 1000);
    expect(result.output).toMatch(new RegExp(`^${uid} /workspace 1\\.`));
  });

  it('has no network: neither the internet nor a server listening on the host loopback', async () => {
    const server = createServer((socket) => socket.end('leak\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const script = `/usr/bin/python3 - <<'EOF'
import socket
for host, port in [("127.0.0.1", ${port}), ("1.1.1.1", 53)]:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((host, port))
        print("connected", host, s.recv(10))
    except OSError as e:
        print("refused", host, e.errno)
try:
    socket.getaddrinfo("registry.npmjs.org", 443)
    print("resolved")
except OSError:
    print("no dns")
EOF`;
      const result = await run(sandbox, script);
      expect(result.output).not.toContain('connected');
      expect(result.output).toContain('refused 127.0.0.1');
      expect(result.output).toContain('refused 1.1.1.1');
      expect(result.output).toContain('no dns');
    } finally {
      server.close();
    }
  });

  it('shows nothing of the host but the system files and its mounts', async () => {
    const listing = await run(sandbox, 'ls /');
    expect(listing.output.trim().split('\n').sort()).toEqual(root);
    const search = await run(
      sandbox,
      `find / -name eval.jsonl 2>/dev/null; cat ${secretDir}/eval.jsonl; grep -rs "#### 42" /etc /tmp /workspace`,
    );
    expect(search.output).not.toContain('#### 42');
    expect(search.output).toContain('No such file');
  });

  it('hides listed host paths even under a system mount', async () => {
    const hidden = '/usr/share/doc';
    const { sandbox: strict } = await makeSandbox({ hidden: [hidden] }, backend);
    try {
      const result = await run(strict, `ls ${hidden} | wc -l`);
      const visible = await run(sandbox, `ls ${hidden} | wc -l`);
      expect(existsSync(hidden)).toBe(true);
      expect(result.output.trim()).toBe('0');
      expect(Number(visible.output.trim())).toBeGreaterThan(0);
    } finally {
      await strict.destroy();
    }
  });

  it('lets jobs write the workspace and /tmp only; read-only mounts stay read-only', async () => {
    // A name no other test or process on the host uses: the job's /tmp must not be the host's.
    const probe = `/tmp/a2rl-sandbox-probe-${randomUUID()}`;
    const result = await run(
      sandbox,
      `echo ok > /workspace/out.txt; echo tmp > ${probe}; cat ${probe}; for p in /workspace/data/train.jsonl /usr/evil /etc/evil /evil; do (echo x > $p) 2>/dev/null && echo "$p written"; done`,
    );
    expect(readFileSync(join(workspace, 'out.txt'), 'utf8')).toBe('ok\n');
    expect(readFileSync(join(readOnlyData, 'train.jsonl'), 'utf8')).toBe('train\n');
    expect(result.output.trim().split('\n')).toEqual(['tmp']);
    expect(existsSync(probe)).toBe(false);
  });

  it('stops every process of a job, including ones that ignore TERM or detach', async () => {
    let job: SandboxProcess | undefined;
    // An odd duration marks the job's processes among the host's.
    const marker = `${300 + Math.floor(Math.random() * 1000) / 1000}`;
    const finished = run(
      sandbox,
      `trap '' TERM; (trap '' TERM; setsid sleep ${marker} &) ; sleep ${marker}`,
      defaultLimits,
      (p) => (job = p),
    );
    // Both sleeps started, however long the host takes to start a sandbox.
    const deadline = Date.now() + 60_000;
    while (liveProcessesWith(`sleep\0${marker}`).length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(liveProcessesWith(`sleep\0${marker}`).length).toBe(2);
    const stopped = Date.now();
    await job!.stop(1000);
    const result = await finished;
    // The 300 s sleeps did not run out: KILL followed the 1 s grace.
    expect(Date.now() - stopped).toBeLessThan(60_000);
    expect(result.exitCode === null || result.exitCode !== 0).toBe(true);
    expect(liveProcessesWith(`sleep\0${marker}`)).toEqual([]);
  });

  it('lets a job that handles TERM exit cleanly within the grace period', async () => {
    let job: SandboxProcess | undefined;
    const ready = join(workspace, `trap-${Math.random().toString(36).slice(2)}`);
    const finished = run(
      sandbox,
      `trap 'echo got TERM; exit 3' TERM; touch /workspace/${basename(ready)}; while true; do sleep 0.1; done`,
      defaultLimits,
      (p) => (job = p),
    );
    // TERM only once the handler is in place: a loaded host may take a while to start the job.
    for (let i = 0; i < 1200 && !existsSync(ready); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(existsSync(ready)).toBe(true);
    await job!.stop(5000);
    const result = await finished;
    expect(result.output).toContain('got TERM');
    expect(result.exitCode).toBe(3);
  });

  it.skipIf(noCgroups)('kills a job over its memory limit and says so', async () => {
    const result = await run(sandbox, '/usr/bin/python3 -c "x = bytearray(400 * 2**20); print(len(x))"', {
      ...defaultLimits,
      memoryBytes: 128 * 2 ** 20,
    });
    expect(result.oomKilled).toBe(true);
    expect(result.output).not.toContain(String(400 * 2 ** 20));
  });

  it.skipIf(noCgroups)('contains a fork bomb with the pids limit', async () => {
    const result = await run(sandbox, 'i=0; while [ $i -lt 200 ]; do sleep 5 & i=$((i+1)); done 2>/dev/null; jobs -p | wc -l', {
      ...defaultLimits,
      pids: 32,
    });
    expect(Number(result.output.trim().split('\n').at(-1))).toBeLessThan(40);
  });

  it.skipIf(noCgroups)('measures CPU time per job', async () => {
    // 1.5 s of the process's own CPU time, however busy the host is.
    const result = await run(sandbox, '/usr/bin/python3 -c "import time\nwhile time.process_time() < 1.5: pass"');
    expect(result.measured).toBe(true);
    expect(result.cpuSeconds).toBeGreaterThan(1.4);
    expect(result.cpuSeconds).toBeLessThan(3.0);
  });

  it.skipIf(noCgroups)('reports the memory a running job holds', async () => {
    let peak = 0;
    await run(sandbox, `/usr/bin/python3 -c "import time\nheld = b'x' * (96 * 2**20)\ntime.sleep(2)"`, defaultLimits, (job) => {
      const timer = setInterval(() => (peak = Math.max(peak, job.usage().memoryBytes ?? 0)), 100);
      void job.exited.then(() => clearInterval(timer));
    });
    expect(peak).toBeGreaterThan(90 * 2 ** 20);
  });
});

describe('moving jobs into cgroups', () => {
  // As Linux lists them: optional fields (shared:, master:) before ' - ', then type, source, the hierarchy's options.
  const hybrid = [
    '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu',
    '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:12 master:1 - cgroup none rw,memory',
    '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate',
  ].join('\n');

  it('names the remount that spares each job start an RCU grace period, keeping the hierarchy options, and is quiet once one has favordynmods', () => {
    expect(slowCgroupMovesReason(hybrid)).toMatch(
      /^per-job limits apply, but .*RCU grace period.*mount -o remount,rw,nsdelegate,favordynmods \/sys\/fs\/cgroup\/unified/,
    );
    expect(slowCgroupMovesReason(hybrid.replace('cgroup2 rw,nsdelegate', 'cgroup2 rw,nsdelegate,favordynmods'))).toBeUndefined();
    // Without a cgroup2 mount only the boot option is left (v1 takes favordynmods when mounted, not on a remount).
    const v1Only = hybrid.split('\n').slice(0, 2).join('\n');
    expect(slowCgroupMovesReason(v1Only)).toMatch(/boot with cgroup_favordynmods=true/);
    expect(slowCgroupMovesReason(v1Only)).not.toMatch(/remount/);
    expect(slowCgroupMovesReason(v1Only.replace('rw,memory', 'rw,memory,favordynmods'))).toBeUndefined();
    // Without cgroups nothing moves.
    expect(slowCgroupMovesReason('22 1 0:21 / /proc rw - proc proc rw')).toBeUndefined();
  });
});
