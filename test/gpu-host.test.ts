import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bubblewrapArgs } from '../sandbox/bwrap.js';
import { containerConfig } from '../sandbox/docker.js';
import { gpuDeviceRequest, gpuPathOf } from '../sandbox/docker-gpus.js';
import { gpuDeviceArgs, hostGpuDevices, parseGpuDevices, readHostGpuDevices } from '../sandbox/gpu-devices.js';
import { packageRoot } from '../src/util/paths.js';

/** What a GPU host's driver decides without a GPU here: the route setup builds, the device nodes a job is given. */
const fixture = (name: string) => join(packageRoot, 'test', 'fixtures', 'nvidia-smi', name);

function route(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync('/bin/sh', [join(packageRoot, 'scripts', 'gpu-route.sh'), ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
  });
  return { status: result.status, fields: result.stdout.trim().split('\t'), stderr: result.stderr.trim() };
}

describe('scripts/gpu-route.sh: the CUDA route a driver runs', () => {
  it.each([
    [535, 'cu126', 'tasks/hflm/requirements-gpu-cu126.txt', /runs CUDA up to 12\.2: CUDA 12\.6 under minor version compatibility/],
    [550, 'cu126', 'tasks/hflm/requirements-gpu-cu126.txt', /runs CUDA up to 12\.4: CUDA 12\.6 under minor version compatibility/],
    [570, 'cu128', 'tasks/hflm/requirements-gpu-cu128.txt', /^driver 570\.86\.15 runs CUDA up to 12\.8$/],
    [580, 'cu130', 'tasks/hflm/requirements-gpu.txt', /^driver 580\.65\.06 runs CUDA up to 13\.0$/],
  ])('driver %i: route %s from %s', (driver, name, lockFile, why) => {
    const result = route(['--nvidia-smi', fixture(`driver-${driver}.txt`)]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.fields.slice(0, 2)).toEqual([name, lockFile]);
    expect(result.fields[2]).toMatch(why);
  });

  it('says "no route" for a CUDA 11 driver, and for a route name it does not know', () => {
    const old = route(['--nvidia-smi', fixture('driver-470.txt')]);
    expect(old.status).toBe(1);
    expect(old.stderr).toMatch(/^gpu-route: no route: driver 470\.256\.02 runs CUDA up to 11\.4/);
    expect(route([], { A2RL_GPU_ROUTE: 'cu128' }).fields.slice(0, 2)).toEqual(['cu128', 'tasks/hflm/requirements-gpu-cu128.txt']);
    const unknown = route([], { A2RL_GPU_ROUTE: 'cu118' });
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toBe(
      'gpu-route: A2RL_GPU_ROUTE=cu118 is no route; name cu126, cu128 or cu130 (or unset it to choose by nvidia-smi)',
    );
  });

  it('has a lock file per route pinning its own torch and vLLM builds, and the CPU file’s every other pin', () => {
    const pins = (file: string) =>
      readFileSync(join(packageRoot, 'tasks', 'hflm', file), 'utf8')
        .split('\n')
        .filter((line) => /^[A-Za-z]/.test(line));
    const shared = pins('requirements.txt').filter((line) => !line.startsWith('torch'));
    for (const [file, build] of [
      ['requirements-gpu-cu126.txt', '+cu126'],
      ['requirements-gpu-cu128.txt', '+cu128'],
    ] as const) {
      const lines = pins(file);
      expect(lines.slice(0, 2)).toEqual([`torch==2.13.0${build}`, `vllm==0.27.1${build}`]);
      expect(lines.slice(2)).toEqual(shared);
    }
    expect(pins('requirements-gpu.txt').slice(2)).toEqual(shared);
  });
});

describe('GPU device nodes by PCI bus id', () => {
  const devices = parseGpuDevices(readFileSync(fixture('query-gpu-4x.csv'), 'utf8') + 'garbage line\n0, [N/A], [N/A]\n');

  it('reads nvidia-smi’s index, bus id and minor number, skipping lines it cannot read', () => {
    expect(devices).toEqual([
      { index: 0, busId: '00000000:18:00.0', minor: 2 },
      { index: 1, busId: '00000000:2A:00.0', minor: 0 },
      { index: 2, busId: '00000000:9A:00.0', minor: 3 },
      { index: 3, busId: '00000000:AB:00.0', minor: 1 },
    ]);
  });

  it('binds each GPU’s own node by its minor number, never /dev/nvidia<index>, with the shared nodes and MIG’s caps', () => {
    expect(gpuDeviceArgs([1, 2], devices)).toEqual([
      ...['--dev-bind', '/dev/nvidia0', '/dev/nvidia0'],
      ...['--dev-bind', '/dev/nvidia3', '/dev/nvidia3'],
      ...['--dev-bind-try', '/dev/nvidiactl', '/dev/nvidiactl'],
      ...['--dev-bind-try', '/dev/nvidia-uvm', '/dev/nvidia-uvm'],
      ...['--dev-bind-try', '/dev/nvidia-uvm-tools', '/dev/nvidia-uvm-tools'],
      ...['--dev-bind-try', '/dev/nvidia-caps', '/dev/nvidia-caps'],
    ]);
    expect(gpuDeviceArgs([], devices)).toEqual([]);
  });

  it('refuses a GPU nvidia-smi does not list instead of guessing its node', () => {
    expect(() => gpuDeviceArgs([4], devices)).toThrow(
      'GPU 4 is not among the GPUs nvidia-smi lists (indices: 0,1,2,3), so its device cannot be given to the job; serve with --gpus naming indices that nvidia-smi -L shows.',
    );
    expect(() => gpuDeviceArgs([0], [])).toThrow(/GPU 0 is not among the GPUs nvidia-smi lists \(indices: none\)/);
  });

  it('reads the host’s GPUs once, off the server’s thread: a job starting meanwhile is refused, nothing waits', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'a2rl-smi-'));
    const calls = join(bin, 'calls');
    writeFileSync(join(bin, 'nvidia-smi'), `#!/bin/sh\necho asked >> ${calls}\necho '0, 00000000:18:00.0, 2'\n`, { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      // The first ask starts the read and answers at once: the job's devices are not known yet.
      expect(hostGpuDevices()).toBeUndefined();
      expect(() => gpuDeviceArgs([0], hostGpuDevices())).toThrow(
        "The host's GPUs are still being read from nvidia-smi, so the job's devices are not known yet; nothing ran: try again in a few seconds.",
      );
      const read = [{ index: 0, busId: '00000000:18:00.0', minor: 2 }];
      expect(await readHostGpuDevices()).toEqual(read);
      expect(hostGpuDevices()).toEqual(read);
      expect(gpuDeviceArgs([0], hostGpuDevices()).slice(0, 3)).toEqual(['--dev-bind', '/dev/nvidia2', '/dev/nvidia2']);
      await readHostGpuDevices();
      expect(readFileSync(calls, 'utf8')).toBe('asked\n');
    } finally {
      process.env.PATH = path;
      rmSync(bin, { recursive: true, force: true });
    }
  });

  it('numbers a job’s GPUs in PCI bus order inside the sandbox', () => {
    const spec = { name: 'gpu', mounts: [], hidden: [], env: {}, workdir: '/tmp' };
    const limits = { cpus: 1, memoryBytes: 2 ** 30, pids: 64, gpus: [2, 3] };
    const args = bubblewrapArgs(spec, { command: ['true'], limits, env: {} }, { count: 2, args: gpuDeviceArgs([2, 3], devices) });
    const env = (key: string) => args[args.findIndex((arg, i) => arg === key && args[i - 1] === '--setenv') + 1];
    expect([env('CUDA_VISIBLE_DEVICES'), env('CUDA_DEVICE_ORDER')]).toEqual(['0,1', 'PCI_BUS_ID']);
    expect(args.join(' ')).toContain('--dev-bind /dev/nvidia3 /dev/nvidia3 --dev-bind /dev/nvidia1 /dev/nvidia1');
  });
});

describe('a Docker GPU job', () => {
  it('gets its GPUs by CDI where the engine has a spec for nvidia.com/gpu, else by --gpus’ runtime hook', () => {
    const cdi = mkdtempSync(join(tmpdir(), 'a2rl-cdi-'));
    try {
      writeFileSync(join(cdi, 'other.yaml'), 'cdiVersion: 0.6.0\nkind: vendor.example/fpga\n');
      expect(gpuPathOf([cdi, '/nonexistent'])).toEqual({ kind: 'gpus' });
      expect(gpuPathOf(undefined)).toEqual({ kind: 'gpus' }); // an engine without CDI (before Docker 25, or CDI off)
      // What `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` writes begins so.
      writeFileSync(join(cdi, 'nvidia.yaml'), '---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n');
      const path = gpuPathOf([cdi]);
      expect(path).toEqual({ kind: 'cdi', specFile: join(cdi, 'nvidia.yaml') });
      expect(gpuDeviceRequest([1, 3], path)).toEqual({ Driver: 'cdi', DeviceIDs: ['nvidia.com/gpu=1', 'nvidia.com/gpu=3'] });
      expect(gpuDeviceRequest([1, 3], { kind: 'gpus' })).toEqual({ Driver: 'nvidia', DeviceIDs: ['1', '3'], Capabilities: [['gpu']] });
    } finally {
      rmSync(cdi, { recursive: true, force: true });
    }
  });

  it('gets a /dev/shm as large as its memory, not Docker’s 64 MB', () => {
    const spec = { name: 'gpu', mounts: [], hidden: [], env: {}, workdir: '/workspace' };
    const limits = { cpus: 2, memoryBytes: 24 * 2 ** 30, pids: 4096, gpus: [0] };
    const config = containerConfig(spec, 'a2rl/micro:latest', 'owner', { tag: 'job', command: ['true'], env: {}, limits });
    expect(config.HostConfig?.ShmSize).toBe(24 * 2 ** 30);
    expect(config.HostConfig?.IpcMode).toBe('private');
  });
});
