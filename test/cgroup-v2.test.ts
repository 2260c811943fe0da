import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/util/paths.js';

/**
 * Per-job cgroups on a pure cgroup v2 host, for real: one boot of a QEMU VM of this machine's root with the unified
 * hierarchy only (../shared/hosts/vm-run.sh; this machine is hybrid v1), in which test/helpers/cgroup-v2-checks.mjs
 * runs the doctor and bubblewrap jobs from a cgroup standing for a systemd service's delegated one.
 */
const vmRun = join(packageRoot, '..', 'shared', 'hosts', 'vm-run.sh');

/** What the VM needs that this machine lacks, or undefined when it can boot. */
function vmMissing(): string | undefined {
  if (!existsSync(vmRun)) return `${vmRun} is not here`;
  const tools = ['qemu-system-x86_64', 'busybox', 'cpio'].filter(
    (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
  );
  const kernel = existsSync('/boot') && readdirSync('/boot').some((name) => name.startsWith('vmlinuz-'));
  const missing = [...tools, ...(kernel ? [] : ['a kernel in /boot'])];
  return missing.length > 0 ? `missing ${missing.join(', ')}` : undefined;
}

const missing = vmMissing();

interface Job {
  exitCode: number | null;
  oomKilled: boolean;
  output: string;
  cpuSeconds: number;
  peakMemoryBytes: number;
  measured: boolean;
  wallSeconds: number;
  files: Record<string, string>;
}

interface Results {
  error?: string;
  doctor: { status: number | null; stdout: string; stderr: string };
  afterDoctor: { ownCgroup: string; subtreeControl: string };
  undelegated: {
    doctor?: { reason?: string };
    server?: string | null;
    failed?: string;
    shell: number;
    procs: string;
    subtreeControl: string;
    children: string[];
  };
  unavailable: string | null;
  ownCgroup: string;
  oom: Job;
  cpu: Job;
  forkBomb: Job;
  leftAfterDispose: string[];
}

describe.skipIf(missing !== undefined)('cgroup v2 (a pure-v2 VM)', () => {
  let results: Results;
  let consoleTail = '';

  beforeAll(() => {
    const out = mkdtempSync(join(tmpdir(), 'a2rl-cgroup-v2-'));
    // As systemd does for a service with Delegate=yes: the root hands memory, cpu and pids down to a cgroup of its own,
    // marked delegated (the xattr trusted.delegate, systemd 251 and later).
    const delegated =
      'echo "+memory +cpu +pids" > /sys/fs/cgroup/cgroup.subtree_control && mkdir /sys/fs/cgroup/svc && ' +
      `/usr/bin/python3 -c "import os; os.setxattr('/sys/fs/cgroup/svc', 'trusted.delegate', b'1')" && ` +
      'echo $$ > /sys/fs/cgroup/svc/cgroup.procs && ' +
      `exec ${process.execPath} test/helpers/cgroup-v2-checks.mjs ${out}/results.json`;
    const vm = spawnSync('sh', [vmRun, '--mem', '2048', '--cpus', '2', '--out', out, '--', 'sh', '-c', delegated], {
      cwd: packageRoot,
      encoding: 'utf8',
      timeout: 540_000,
    });
    consoleTail = existsSync(join(out, 'vm-console.log')) ? readFileSync(join(out, 'vm-console.log'), 'utf8').slice(-4000) : vm.stderr;
    if (!existsSync(join(out, 'results.json')))
      throw new Error(`the VM wrote no results (status ${vm.status}):\n${vm.stdout}\n${consoleTail}`);
    results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
    if (results.error) throw new Error(`the checks failed in the VM: ${results.error}\n${consoleTail}`);
  }, 560_000);

  it('a2rl doctor names cgroup v2 and exactly what it enforces; --require exits 1 for the one that cannot work (gpu)', () => {
    const { doctor } = results;
    expect(doctor.stdout).toMatch(/^bwrap\tworks$/m);
    expect(doctor.stdout).toMatch(
      /^limits\tper job, cgroup v2 \(under \/sys\/fs\/cgroup\/svc\/a2rl\): memory\.max \+ memory\.swap\.max \(no swap\), cpu\.max, pids\.max; CPU-seconds from cpu\.stat, peak memory from memory\.peak, OOM kills from memory\.events$/m,
    );
    expect(doctor.stdout).not.toMatch(/^limits\tFAILED/m);
    expect(doctor.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^doctor: required gpu cannot work here: gpu: no GPU/)]);
    expect(doctor.status).toBe(1);
  });

  it("changes no cgroup it was not given: the doctor only reads, and an undelegated one holding others' processes is refused", () => {
    expect(results.afterDoctor).toEqual({ ownCgroup: '0::/svc', subtreeControl: '' });
    const { undelegated } = results;
    expect(undelegated.failed).toBeUndefined();
    const refusal = new RegExp(
      `^no per-job cgroups: the cgroup v2 folder /sys/fs/cgroup/session is not delegated to this server: it holds processes that are not the server's \\(${undelegated.shell} sleep\\) and systemd marked it with no Delegate=yes.*: run the server as a systemd service with Delegate=yes`,
    );
    expect(undelegated.doctor?.reason).toMatch(refusal);
    expect(undelegated.server).toMatch(refusal);
    // Nothing moved, nothing enabled, no leaf made: the other process is where it was.
    expect(undelegated.procs).toBe(String(undelegated.shell));
    expect(undelegated.subtreeControl).toBe('');
    expect(undelegated.children).toEqual([]);
  });

  it("moves the server into a leaf of its delegated cgroup, and writes each job's limits in a cgroup of its own under it", () => {
    expect(results.unavailable).toBeNull();
    expect(results.ownCgroup).toBe('0::/svc/a2rl-server');
    expect(results.oom.files).toMatchObject({ 'memory.max': String(64 * 2 ** 20), 'memory.swap.max': '0', 'cpu.max': '100000 100000' });
    expect(results.forkBomb.files).toMatchObject({ 'pids.max': '32', 'cpu.max': '150000 100000', 'memory.max': String(256 * 2 ** 20) });
    // The job's processes were in it (the shell joins before it becomes bwrap).
    expect(results.cpu.files.procs).toMatch(/^\d+/);
    // The server's group went with its backend; nothing is left under the subtree.
    expect(results.leftAfterDispose).toEqual([]);
  });

  it('kills a job over its memory and records the OOM kill (memory.events), its peak from memory.peak', () => {
    const { oom } = results;
    expect(oom.oomKilled).toBe(true);
    expect(oom.output).not.toContain(String(300 * 2 ** 20));
    expect(oom.peakMemoryBytes).toBeGreaterThan(48 * 2 ** 20);
    expect(oom.peakMemoryBytes).toBeLessThanOrEqual(64 * 2 ** 20);
  });

  it('charges a job held to one core (cpu.max) at most one CPU-second a second, from cpu.stat', () => {
    const { cpu } = results;
    expect(cpu.measured).toBe(true);
    expect(cpu.files['cpu.max']).toBe('100000 100000');
    // Two busy loops for 4 s: unlimited they would take both of the VM's cores. How much of one they get depends on
    // the emulation's speed, so only that it was measured and held under one core's worth is checked.
    expect(cpu.cpuSeconds).toBeGreaterThan(0);
    expect(cpu.cpuSeconds).toBeLessThanOrEqual(cpu.wallSeconds + 0.1);
  });

  it('stops a fork bomb at pids.max', () => {
    const { files } = results.forkBomb;
    expect(Number(files['pids.peak'])).toBeLessThanOrEqual(32);
    // Forks the kernel refused at the limit.
    expect(Number(/^max (\d+)/m.exec(files['pids.events'] ?? '')?.[1])).toBeGreaterThan(0);
  });
});

if (missing) {
  describe('cgroup v2 (a pure-v2 VM)', () => {
    it.skip(`skipped: ${missing}; install the Debian packages qemu-system-x86 linux-image-amd64 busybox-static cpio to run it`, () =>
      undefined);
  });
}
