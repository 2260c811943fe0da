import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/util/paths.js';

/**
 * scripts/setup.sh's plan (`--plan`), on host layouts made of fixtures: the packages a host has are a dpkg database of
 * our own (dpkg-query reads DPKG_ADMINDIR), and the commands it finds are a PATH of our own (links to the tools setup
 * uses, a `nvidia-smi` that prints a saved driver's output). Nothing is installed: --plan changes nothing, and this way
 * the test needs no container and adds nothing to CI's own setup.
 */
const tools = ['sh', 'dpkg-query', 'grep', 'cut', 'sha256sum', 'cat', 'id', 'awk', 'sed', 'head', 'wc', 'dirname', 'sort', 'timeout'];
let scratch: string;
/** Where this machine has each of those tools, found once. */
let toolPaths: string[];

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'a2rl-setup-plan-'));
  toolPaths = spawnSync('sh', ['-c', `for t in ${tools.join(' ')}; do command -v $t; done`], { encoding: 'utf8' })
    .stdout.trim()
    .split('\n');
  expect(toolPaths).toHaveLength(tools.length);
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A host with these Debian packages installed and, on PATH, only setup's tools (plus what `extra` adds). */
function host(name: string, packages: string[], extra: Record<string, string> = {}): { admin: string; bin: string } {
  const admin = join(scratch, name, 'dpkg');
  const bin = join(scratch, name, 'bin');
  mkdirSync(admin, { recursive: true });
  mkdirSync(bin, { recursive: true });
  const entry = (p: string) =>
    `Package: ${p}\nStatus: install ok installed\nPriority: optional\nSection: misc\nMaintainer: fixture <fixture@example.org>\n` +
    `Architecture: amd64\nVersion: 1.0\nDescription: fixture\n`;
  writeFileSync(join(admin, 'status'), packages.map(entry).join('\n'));
  for (const [i, tool] of tools.entries()) symlinkSync(toolPaths[i]!, join(bin, tool));
  for (const [command, script] of Object.entries(extra)) {
    writeFileSync(join(bin, command), `#!/bin/sh\n${script}\n`);
    chmodSync(join(bin, command), 0o755);
  }
  return { admin, bin };
}

function plan(layout: { admin: string; bin: string }, args: string[], env: Record<string, string> = {}) {
  const result = spawnSync('/bin/sh', [join(packageRoot, 'scripts', 'setup.sh'), '--plan', ...args], {
    encoding: 'utf8',
    env: { PATH: layout.bin, DPKG_ADMINDIR: layout.admin, ...env },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const installLine = (stdout: string) => /^ {2}install Debian packages:(.*)$/m.exec(stdout)?.[1]?.trim().split(' ') ?? [];
const base = ['bubblewrap', 'python3-torch', 'python3-numpy', 'libopenblas0-pthread', 'python3-venv'];
const smi = (driver: number) => readFileSync(join(packageRoot, 'test', 'fixtures', 'nvidia-smi', `driver-${driver}.txt`), 'utf8');
const fakeSmi = (driver: number) => ({
  'nvidia-smi': `[ "\${1:-}" = -L ] && { echo "GPU 0: fixture"; exit 0; }\ncat <<'EOF'\n${smi(driver)}EOF`,
});

/** npm test's pure cgroup v2 host: the VM's tools (test/cgroup-v2.test.ts). */
const testVm = ['qemu-system-x86', 'linux-image-amd64', 'busybox-static', 'cpio'];

describe('scripts/setup.sh --plan', () => {
  it('keeps a host’s docker-ce: npm test’s plan installs its other extras but never docker.io', () => {
    const result = plan(host('docker-ce', [...base, 'docker-ce', 'docker-ce-cli']), ['test'], { A2RL_FULL_GPU: '0' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^ {2}Docker engine: docker-ce, kept \(docker\.io is not installed over it\)$/m);
    expect(installLine(result.stdout)).toEqual(['chromium', 'debootstrap', 'slurmctld', 'slurmd', 'slurm-client', 'munge', ...testVm]);
  });

  it('counts podman-docker, a dockerd on PATH, and a docker client that reaches an engine, as an engine too', () => {
    const podman = plan(host('podman', ['podman-docker']), ['test'], { A2RL_FULL_GPU: '0' });
    expect(podman.stdout).toMatch(/Docker engine: podman-docker, kept/);
    const onPath = host('docker-binary', [], { docker: 'exit 0' });
    const binary = plan(onPath, ['test'], { A2RL_FULL_GPU: '0' });
    expect(binary.stdout).toContain(`Docker engine: ${join(onPath.bin, 'docker')}, kept`);
    expect(installLine(binary.stdout)).not.toContain('docker.io');
    const daemon = host('dockerd-binary', [], { dockerd: 'exit 0' });
    expect(plan(daemon, ['test'], { A2RL_FULL_GPU: '0' }).stdout).toContain(`Docker engine: ${join(daemon.bin, 'dockerd')}, kept`);
  });

  it('installs docker.io beside a docker client that reaches no engine (a static binary, docker-ce-cli alone)', () => {
    const client = plan(
      host('docker-client', ['docker-ce-cli'], { docker: 'echo "Cannot connect to the Docker daemon" >&2; exit 1' }),
      ['test'],
      {
        A2RL_FULL_GPU: '0',
      },
    );
    expect(client.stdout).toMatch(/^ {2}Docker engine: none found, docker\.io to install$/m);
    expect(installLine(client.stdout)).toContain('docker.io');
  });

  it('installs docker.io for npm test only where no engine is present', () => {
    const result = plan(host('bare', []), ['test'], { A2RL_FULL_GPU: '0' });
    expect(result.stdout).toMatch(/^ {2}Docker engine: none found, docker\.io to install$/m);
    expect(installLine(result.stdout)).toEqual([
      ...base,
      'chromium',
      'debootstrap',
      'slurmctld',
      'slurmd',
      'slurm-client',
      'munge',
      'docker.io',
      ...testVm,
    ]);
  });

  it('plans for the demo only what the demo needs: no test extras, agent CLIs or .venv-full', () => {
    const result = plan(host('demo', []), ['demo']);
    expect(result.status, result.stderr).toBe(0);
    expect(installLine(result.stdout)).toEqual(base.slice(0, 4));
    expect(result.stdout).not.toMatch(/Docker|agent CLIs|\.venv-full/);
    expect(result.stdout).toMatch(/^setup: plan for: serve$/m);
  });

  it('picks the GPU route from the driver nvidia-smi reports, with the compiler and headers Triton needs', () => {
    const gpuHost = host('gpu-570', base, fakeSmi(570));
    const result = plan(gpuHost, ['full']);
    expect(result.status, result.stderr).toBe(0);
    expect(installLine(result.stdout)).toEqual(['gcc', 'libc6-dev', 'python3-dev']);
    const route = /\.venv-full from tasks\/hflm\/requirements-gpu-cu128\.txt \(route cu128: driver 570\.86\.15 runs CUDA up to 12\.8\)/;
    expect(result.stdout).toMatch(new RegExp(`${route.source}, wheels from the index pip is configured with$`, 'm'));
    // A bundle's wheels (a2rl prepare --bundle) instead of an index:
    const bundled = plan(gpuHost, ['full'], { A2RL_WHEELS: scratch });
    expect(bundled.stdout).toMatch(new RegExp(`${route.source}, wheels from ${scratch} only \\(no index\\)$`, 'm'));
  });

  it('says "no route" for a driver no route runs, before it plans, installs or downloads anything', () => {
    const result = plan(host('gpu-470', [], fakeSmi(470)), ['full']);
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^gpu-route: no route: driver 470\.256\.02 runs CUDA up to 11\.4, .*update the NVIDIA driver/m);
    expect(result.stderr).toMatch(/^setup: no GPU route for this host \(the reason is above\); nothing was installed$/m);
  });

  it('refuses a command it does not know, naming those it does', () => {
    const result = plan(host('typo', []), ['tests']);
    expect(result.status).toBe(2);
    expect(result.stderr).toBe(
      'setup: "tests" is not a setup command; name any of serve, demo, bench, agents, full, test (or --plan to print the plan only)\n',
    );
  });
});
