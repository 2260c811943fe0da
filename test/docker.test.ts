import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { CappedLog, defaultLogCap } from '../src/jobs/capped-log.js';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerClient } from '../sandbox/docker-client.js';
import { DockerBackend, type DockerInstance, labels } from '../sandbox/docker.js';
import { jobUser } from '../sandbox/job-identity.js';
import { processStartTime } from '../sandbox/process-tree.js';
import { Store } from '../src/store/store.js';
import { prepareDocker } from './helpers/docker.js';
import { rawServer, startServer } from './helpers/mcp.js';
import { defaultLimits, makeSandbox, run, tempDir } from './helpers/sandbox.js';

// What the Docker backend does beyond the shared contract (test/sandbox.test.ts), read back from the real engine.
const unavailable = await prepareDocker();
const owner = `${process.pid}-${processStartTime(process.pid)}`;
const ownerAlive = (name: string) => {
  const [pid, start] = name.split('-').map(Number);
  return pid !== undefined && processStartTime(pid) === start;
};

describe.skipIf(unavailable)(`docker backend${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  const backend = new DockerBackend({ owner });
  let sandbox: DockerInstance;
  let data: string;

  beforeAll(async () => {
    data = tempDir('data');
    writeFileSync(join(data, 'train.jsonl'), 'x\n');
    sandbox = (
      await makeSandbox(
        {
          mounts: [{ source: data, target: '/workspace/data', readOnly: true }],
          limits: { cpus: 1, memoryBytes: 768 * 2 ** 20, pids: 200 },
        },
        backend,
      )
    ).sandbox as DockerInstance;
  });

  afterAll(async () => {
    await sandbox?.destroy();
  });

  it('confines the run container: no network, no capabilities, read-only root, non-root, limits, labels, only its mounts', async () => {
    const info = await backend.docker.getContainer(sandbox.id).inspect();
    expect(info.State.Running).toBe(true);
    const user = jobUser('test');
    expect(user.uid).not.toBe(0);
    expect(info.Config.User).toBe(`${user.uid}:${user.gid}`);
    expect(info.Config.Labels).toMatchObject({ [labels.owner]: owner, [labels.run]: 'test' });
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect(info.HostConfig.CapDrop).toEqual(['ALL']);
    expect(info.HostConfig.SecurityOpt).toEqual(['no-new-privileges']);
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(Object.keys(info.HostConfig.Tmpfs ?? {})).toEqual(['/tmp']);
    expect(info.HostConfig).toMatchObject({ Memory: 768 * 2 ** 20, NanoCpus: 1e9, PidsLimit: 200 });
    expect(info.Mounts.map((m) => [m.Destination, m.RW]).sort()).toEqual([
      ['/workspace', true],
      ['/workspace/data', false],
    ]);
  });

  it('streams stdout and stderr into the job log while the job runs', async () => {
    const log = new CappedLog(join(tempDir('log'), 'job.log'), defaultLogCap);
    const job = sandbox.exec({
      command: ['/bin/sh', '-c', 'echo out; echo err >&2; sleep 30'],
      limits: defaultLimits,
      output: log,
      tag: 'stream',
    });
    for (let i = 0; i < 50 && !readFileSync(log.path, 'utf8').includes('err'); i++) await new Promise((r) => setTimeout(r, 100));
    expect(readFileSync(log.path, 'utf8').split('\n').sort()).toEqual(['', 'err', 'out']);
    const status = await job.stop(1000);
    expect(status.exitCode).not.toBe(0);
  });

  it('reports the exit code of a job', async () => {
    expect((await run(sandbox, 'exit 7')).exitCode).toBe(7);
  });

  it('gives a GPU job a container of its own with DeviceRequests for exactly its GPUs', async () => {
    const options = { command: ['nvidia-smi'], limits: { ...defaultLimits, gpus: [1, 3] }, output: { captureBytes: 0 }, tag: 'gpu-job' };
    const container = await sandbox.createJobContainer(options);
    try {
      const info = await container.inspect();
      expect(info.HostConfig.DeviceRequests).toEqual([
        { Driver: 'nvidia', Count: 0, DeviceIDs: ['1', '3'], Capabilities: [['gpu']], Options: null },
      ]);
      expect(info.Config.Labels).toMatchObject({ [labels.job]: 'gpu-job', [labels.run]: 'test' });
      expect(info.HostConfig.NetworkMode).toBe('none');
      expect(info.Config.Env).toContain('OMP_NUM_THREADS=1');
    } finally {
      await container.remove({ force: true });
    }
  });

  it('reports a GPU job the engine cannot give its GPUs (no NVIDIA runtime here) as failed to run, and leaves no container', async () => {
    const result = await run(sandbox, 'nvidia-smi', { ...defaultLimits, gpus: [0] });
    expect(result.exitCode).toBeNull();
    expect(result.output).toMatch(/could not run in its container: .*nvidia/);
    expect(await backend.docker.listContainers({ all: true, filters: { label: [labels.job] } })).toEqual([]);
  });

  it('after a crash, removes the containers a dead server left and kills their jobs; a live server’s stay', async () => {
    const orphan = await makeSandbox({}, new DockerBackend({ owner: '1-1' }));
    const marker = `${400 + Math.floor(Math.random() * 1000) / 1000}`;
    const job = orphan.sandbox.exec({ command: ['sleep', marker], limits: defaultLimits, output: { captureBytes: 0 }, tag: 'orphan' });
    await new Promise((r) => setTimeout(r, 1000));
    const sleeping = () => readdirSync('/proc').filter((p) => /^\d+$/.test(p) && cmdline(p) === `sleep\0${marker}\0`);
    expect(sleeping()).toHaveLength(1);
    const swept = await backend.sweep(ownerAlive);
    expect(swept).toContain('test');
    await job.exited;
    expect(sleeping()).toEqual([]);
    expect((await backend.docker.getContainer(sandbox.id).inspect()).State.Running).toBe(true);
    const left = await backend.docker.listContainers({ all: true, filters: { label: [`${labels.owner}=1-1`] } });
    expect(left).toEqual([]);
  });

  it('a killed server leaves its container behind; the next start removes it, kills its job and marks the job lost', async () => {
    const home = tempDir('home');
    const server = rawServer(home, ['--sandbox', 'docker']);
    await server.initialize();
    const marker = `${500 + Math.floor(Math.random() * 1000) / 1000}`;
    const started = (await server.request('tools/call', { name: 'run_training', arguments: { command: `sleep ${marker}` } })).result
      .structuredContent;
    const jobSeq = Number(started.job_id.replace('job-', ''));
    const sleeping = () => readdirSync('/proc').filter((p) => /^\d+$/.test(p) && cmdline(p) === `sleep\0${marker}\0`);
    for (let i = 0; i < 100 && sleeping().length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    const runId = readdirSync(join(home, 'runs'))[0]!;
    const runContainers = () => backend.docker.listContainers({ all: true, filters: { label: [`${labels.run}=${runId}`] } });
    server.child.kill('SIGKILL');
    await server.exited;
    expect(sleeping()).toHaveLength(1);
    expect(await runContainers()).toHaveLength(1);
    const client = await startServer({ home, serverArgs: ['--sandbox', 'docker'] });
    const store = new Store(join(home, 'store.sqlite'));
    try {
      expect(store.getJobBySeq(runId, jobSeq)).toMatchObject({ run_id: runId, state: 'lost' });
      expect(await runContainers()).toEqual([]);
      for (let i = 0; i < 50 && sleeping().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(sleeping()).toEqual([]);
    } finally {
      store.close();
      // The client kills a server still grading its baseline after 4 s; what that server left goes, as its successor would remove it.
      await client.close();
      // close() sends that SIGKILL without waiting for the exit.
      await new Promise((r) => setTimeout(r, 1000));
      await backend.sweep(ownerAlive);
    }
  });

  it('removes the container when the sandbox is destroyed', async () => {
    const { sandbox: short } = await makeSandbox({}, backend);
    const id = (short as DockerInstance).id;
    await short.destroy();
    await expect(backend.docker.getContainer(id).inspect()).rejects.toThrow(/no such container/i);
  });
});

function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

describe('docker backend without an engine', () => {
  it('says which engine did not answer and what to do, with the ping the CLI commands share (engineSilence)', async () => {
    const docker = dockerClient({ socketPath: join(tempDir('no-engine'), 'docker.sock') });
    expect(await new DockerBackend({ owner, docker }).unavailableReason()).toMatch(
      /^no Docker engine answered at \S+ within 10 s \(.*ENOENT.*\); install docker\.io and start dockerd, or set DOCKER_HOST$/,
    );
  });
});
