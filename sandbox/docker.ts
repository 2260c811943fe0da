import type Docker from 'dockerode';
import { giveWritableMounts, jobUser } from './job-identity.js';
import { availableParallelism } from 'node:os';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { cgroupBaseOf, cgroupsUnavailableReason, JobCgroup, leafNames, slowCgroupMovesReason, sweepChildCgroups } from './cgroup.js';
import { processTree, signalAll } from './process-tree.js';
import type {
  ExecOptions,
  ExitStatus,
  ResourceLimits,
  ResourceUsage,
  SandboxBackend,
  SandboxInstance,
  SandboxProcess,
  SandboxSpec,
} from './contract.js';
import { type DockerGpuPath, engineGpuPath, gpuDeviceRequest } from './docker-gpus.js';
import { imagePythonVersion, venvMismatch, venvPythonVersion } from './venv-python.js';
import { A2rlError } from '../src/util/errors.js';
import { dockerClient, engineSilence } from './docker-client.js';

/** Image the micro tasks run in, built by `a2rl images build micro`. */
export const defaultImage = 'a2rl/micro:latest';
/** Labels on everything this backend creates: the owning server (for the sweep after a crash), the run, the job. */
export const labels = { owner: 'a2rl.owner', run: 'a2rl.run', job: 'a2rl.job' } as const;
/** Job cgroups inside a container's cgroup are named after this prefix, so a sweep finds what a crash left. */
const jobCgroupPrefix = 'a2rl-';

/**
 * The job's first process waits, with shell builtins only (a fork would escape), until the
 * server has moved it into the job's own cgroups (v1: pids last, see JobCgroup.join; v2: its one
 * folder, the `0::` line), then becomes the job: every process of the job is limited, measured
 * and stoppable as one.
 */
const joinCgroupThenRun =
  'until moved=; while IFS= read -r line; do case $line in *:pids:*"/$A2RL_CGROUP"|0::*"/$A2RL_CGROUP") moved=1;; esac; done < /proc/self/cgroup; [ -n "$moved" ]; do :; done; unset A2RL_CGROUP; exec "$@"';

export interface DockerBackendOptions {
  /** Names this server on everything it creates, so a later start can sweep what a crash left. */
  owner: string;
  image?: string;
  /** Engine connection (default: DOCKER_HOST or /var/run/docker.sock). */
  docker?: Docker;
}

/**
 * Docker: one long-lived container per sandbox (a run, a grading), jobs started in it with
 * `exec`, each in a cgroup of its own under the container's for its limits, CPU accounting
 * and OOM report. Jobs that hold GPUs get a container of their own, since devices are given
 * to whole containers (`DeviceRequests`).
 */
export class DockerBackend implements SandboxBackend {
  readonly name = 'docker';
  readonly docker: Docker;
  readonly image: string;
  /** The image's Python version, read once, when a sandbox first mounts a virtual environment. */
  private imagePython: Promise<string> | undefined;
  private engineGpus: Promise<DockerGpuPath> | undefined;

  constructor(private readonly options: DockerBackendOptions) {
    this.docker = options.docker ?? dockerClient();
    this.image = options.image ?? defaultImage;
  }

  async unavailableReason(): Promise<string | undefined> {
    const silence = await engineSilence(this.docker);
    if (silence) return `${silence}; install docker.io and start dockerd, or set DOCKER_HOST`;
    try {
      await this.docker.getImage(this.image).inspect();
    } catch {
      return `the image ${this.image} is missing; build it with: a2rl images build micro`;
    }
    return undefined;
  }

  async create(spec: SandboxSpec): Promise<SandboxInstance> {
    // A mounted virtual environment (the full tier's, read-only) runs with the image's Python: refused here when they
    // differ. Writable mounts (the agent's workspace) are not looked at: a pyvenv.cfg the agent wrote is no runtime.
    const readOnlyMounts = spec.mounts.filter((mount) => mount.readOnly);
    if (readOnlyMounts.some((mount) => venvPythonVersion(mount.source) !== undefined)) {
      // A failed read (the engine busy) is not kept: the next sandbox asks again.
      this.imagePython ??= imagePythonVersion(this.docker, this.image, { [labels.owner]: this.options.owner }).catch((error: unknown) => {
        this.imagePython = undefined;
        throw error;
      });
      const mismatch = venvMismatch(readOnlyMounts, this.image, await this.imagePython);
      if (mismatch) throw new A2rlError('SANDBOX_UNAVAILABLE', mismatch);
    }
    const instance = new DockerInstance(spec, this.docker, this.image, this.options.owner, await this.gpuPath());
    await instance.start();
    return instance;
  }

  /** How this engine gives a container GPUs: CDI or the `--gpus` hook (sandbox/docker-gpus.ts), asked once. */
  gpuPath(): Promise<DockerGpuPath> {
    return (this.engineGpus ??= engineGpuPath(this.docker));
  }

  hostCheck(): string | undefined {
    const noCgroups = cgroupsUnavailableReason();
    if (noCgroups) return `${noCgroups}: jobs run with the container's limits only, and compute is charged as wall time × all cores`;
    return slowCgroupMovesReason();
  }

  /** Nothing to release: every container goes with its sandbox. */
  async dispose(): Promise<void> {}

  /** After a crash: removes the containers of servers that are gone, and the job cgroups left in them. */
  async sweep(ownerAlive: (owner: string) => boolean): Promise<string[]> {
    const containers = await this.docker.listContainers({ all: true, filters: { label: [labels.owner] } });
    const removed: string[] = [];
    for (const info of containers) {
      if (ownerAlive(info.Labels[labels.owner] ?? '')) continue;
      const container = this.docker.getContainer(info.Id);
      const pid = info.State === 'running' ? (await container.inspect()).State.Pid : 0;
      const base = pid > 0 ? cgroupBaseOf(pid) : undefined;
      if (base) sweepChildCgroups(base, jobCgroupPrefix);
      await container.remove({ force: true }).catch(() => undefined);
      removed.push(info.Labels[labels.run] ?? info.Id);
    }
    return removed;
  }
}

/** What a container of the sandbox runs with: mounts, limits, confinement. */
export function containerConfig(
  spec: SandboxSpec,
  image: string,
  owner: string,
  job?: { tag: string; command: string[]; env: Record<string, string>; limits: ResourceLimits },
  gpuPath: DockerGpuPath = { kind: 'gpus' },
): Docker.ContainerCreateOptions {
  const ceiling = job?.limits ?? spec.limits;
  const tmpfs: Record<string, string> = { '/tmp': 'rw,nosuid,nodev,size=1g' };
  // The image is not the host, but a path listed as hidden is hidden here too wherever the image has it.
  for (const hidden of spec.hidden) if (hidden.startsWith('/usr/') || hidden.startsWith('/etc/')) tmpfs[hidden] = 'ro,size=4k';
  return {
    Image: image,
    name: `a2rl-${spec.name}-${job?.tag ?? 'sandbox'}-${Math.random().toString(36).slice(2, 8)}`.replace(/[^a-zA-Z0-9_.-]/g, '-'),
    Labels: { [labels.owner]: owner, [labels.run]: spec.name, ...(job ? { [labels.job]: job.tag } : {}) },
    // A run's container idles until jobs are started in it; a job's container is the job.
    Cmd: job?.command ?? ['/bin/sleep', 'infinity'],
    Entrypoint: [],
    User: containerUser(spec),
    WorkingDir: spec.workdir,
    Env: Object.entries({ ...baseEnv(spec), ...(job?.env ?? {}) }).map(([key, value]) => `${key}=${value}`),
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      Mounts: spec.mounts.map((mount) => ({ Type: 'bind' as const, Source: mount.source, Target: mount.target, ReadOnly: mount.readOnly })),
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
      Tmpfs: tmpfs,
      // A real init reaps what jobs orphan, so nothing lingers as a zombie in a long-lived container.
      Init: true,
      IpcMode: 'private',
      ...(ceiling
        ? {
            Memory: ceiling.memoryBytes,
            MemorySwap: ceiling.memoryBytes,
            NanoCpus: Math.round(Math.min(ceiling.cpus, availableParallelism()) * 1e9),
            PidsLimit: ceiling.pids,
            // /dev/shm as large as the job's memory (Docker's default is 64 MB): NCCL and DataLoader workers pass tensors
            // through it, and what it holds is charged to the container's memory all the same.
            ShmSize: ceiling.memoryBytes,
          }
        : { PidsLimit: 4096 }),
      DeviceRequests: job && job.limits.gpus.length > 0 ? [gpuDeviceRequest(job.limits.gpus, gpuPath)] : undefined,
    },
  };
}

/** The run's own unprivileged uid (sandbox/job-identity.ts), never the image's user 1000 (on a host, usually its first human). */
function containerUser(spec: SandboxSpec): string {
  const user = jobUser(spec.name);
  return `${user.uid}:${user.gid}`;
}

function baseEnv(spec: SandboxSpec): Record<string, string> {
  return { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: spec.workdir, LANG: 'C.UTF-8', ...spec.env };
}

/** Thread counts for BLAS and OpenMP runtimes, which otherwise size themselves to the host's cores. */
function threadEnv(limits: ResourceLimits): Record<string, string> {
  const threads = String(Math.max(1, Math.ceil(limits.cpus)));
  return { OMP_NUM_THREADS: threads, OPENBLAS_NUM_THREADS: threads, MKL_NUM_THREADS: threads };
}

export class DockerInstance implements SandboxInstance {
  private container: Docker.Container | undefined;
  private readonly running = new Set<DockerProcess>();

  constructor(
    readonly spec: SandboxSpec,
    private readonly docker: Docker,
    private readonly image: string,
    private readonly owner: string,
    private readonly gpuPath: DockerGpuPath = { kind: 'gpus' },
  ) {}

  async start(): Promise<void> {
    await giveWritableMounts(this.spec);
    const container = await this.docker.createContainer(containerConfig(this.spec, this.image, this.owner));
    try {
      await container.start();
    } catch (error) {
      await container.remove({ force: true }).catch(() => undefined);
      throw error;
    }
    this.container = container;
  }

  get id(): string {
    return this.container!.id;
  }

  exec(options: ExecOptions): SandboxProcess {
    const job =
      options.limits.gpus.length > 0
        ? DockerProcess.inOwnContainer(
            this.docker,
            containerConfig(this.spec, this.image, this.owner, this.jobSpec(options), this.gpuPath),
            options,
          )
        : DockerProcess.inContainer(this.container!, this.spec, options);
    this.running.add(job);
    void job.exited.then(() => this.running.delete(job));
    return job;
  }

  /** The container a GPU job gets, created (not started) so that its configuration can be read back. */
  async createJobContainer(options: ExecOptions): Promise<Docker.Container> {
    return this.docker.createContainer(containerConfig(this.spec, this.image, this.owner, this.jobSpec(options), this.gpuPath));
  }

  async destroy(): Promise<void> {
    await Promise.all([...this.running].map((job) => job.stop(2000)));
    await this.container?.remove({ force: true }).catch(() => undefined);
  }

  private jobSpec(options: ExecOptions) {
    return {
      tag: options.tag,
      command: options.command,
      env: { ...threadEnv(options.limits), ...options.env },
      limits: options.limits,
    };
  }
}

/** Where a job's demultiplexed output goes: the caller's sink (its log), or the first bytes of stdout kept in memory. */
class OutputRouter {
  private readonly chunks: Buffer[] = [];
  private kept = 0;

  constructor(private readonly output: ExecOptions['output']) {}

  stream(kind: 'stdout' | 'stderr'): Writable {
    return new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        this.write(kind, chunk);
        done();
      },
    });
  }

  /** Passes each chunk on at once, so stdout and stderr land in the log in the order they came. */
  write(kind: 'stdout' | 'stderr', chunk: Buffer): void {
    if (!('captureBytes' in this.output)) this.output.write(chunk);
    else if (kind === 'stdout' && this.kept < this.output.captureBytes) {
      this.chunks.push(chunk.subarray(0, this.output.captureBytes - this.kept));
      this.kept += chunk.length;
    }
  }

  captured(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

class DockerProcess implements SandboxProcess {
  readonly exited: Promise<ExitStatus>;
  private hostPid = -1;
  /** Set for a job that is a container of its own. */
  private ownContainer: Docker.Container | undefined;
  private cgroup: JobCgroup | undefined;
  private finalUsage: ResourceUsage | undefined;
  private readonly startedAt = Date.now();
  private readonly sink: OutputRouter;
  private stopping = false;
  /** Resolves once the job's processes exist (or it failed to start): stop() waits for it. */
  private readonly started: Promise<void>;
  private markStarted: () => void = () => undefined;

  private constructor(
    output: ExecOptions['output'],
    private readonly limits: ResourceLimits,
    run: (process: DockerProcess) => Promise<ExitStatus>,
  ) {
    this.sink = new OutputRouter(output);
    this.started = new Promise((resolve) => (this.markStarted = resolve));
    this.exited = run(this)
      .catch((error: unknown) => {
        this.sink.write('stderr', Buffer.from(`a2rl: the job could not run in its container: ${(error as Error).message}\n`));
        return { exitCode: null, signal: null, oomKilled: false };
      })
      .then(async (status) => {
        const oomKilled = status.oomKilled || (this.cgroup?.oomKills() ?? 0) > 0;
        this.finalUsage = this.usage();
        // Whatever the job left behind dies with it; the cgroup goes once it is empty.
        await this.cgroup?.killAndRemove();
        this.markStarted();
        return { ...status, oomKilled };
      });
  }

  /** A job started with `exec` in the sandbox's container, moved into its own cgroup before it runs. */
  static inContainer(container: Docker.Container, spec: SandboxSpec, options: ExecOptions): DockerProcess {
    const cgroupName = `${jobCgroupPrefix}${options.tag}`;
    // Without writable cgroups the job runs under the container's limits only, unmeasured.
    const ownCgroup = cgroupsUnavailableReason() === undefined;
    return new DockerProcess(options.output, options.limits, async (job) => {
      const exec = await container.exec({
        Cmd: ownCgroup ? ['/bin/sh', '-c', joinCgroupThenRun, 'sh', ...options.command] : options.command,
        Env: Object.entries({ ...baseEnv(spec), ...threadEnv(options.limits), ...options.env, A2RL_CGROUP: cgroupName }).map(
          ([key, value]) => `${key}=${value}`,
        ),
        User: containerUser(spec),
        WorkingDir: spec.workdir,
        AttachStdout: true,
        AttachStderr: true,
      });
      const stream = await exec.start({ hijack: true, stdin: false });
      let streamEnded = false;
      const ended = new Promise<void>((resolve) => {
        stream.once('end', resolve);
        stream.once('close', resolve);
        stream.once('error', () => resolve());
      }).then(() => void (streamEnded = true));
      container.modem.demuxStream(stream, job.sink.stream('stdout'), job.sink.stream('stderr'));
      // The engine may answer before the process exists (not running, no exit code yet): wait for its pid, or its end.
      // No deadline: the process spins until it is moved, so giving up on a slow engine would leave it unmoved,
      // unlimited and out of stop()'s reach. An exec the engine failed to start ends its stream with no pid.
      let info = await exec.inspect();
      for (let pause = 5; info.Pid === 0 && info.ExitCode === null && !streamEnded; pause = Math.min(2 * pause, 200)) {
        await sleep(pause);
        info = await exec.inspect();
      }
      if (info.Pid > 0) {
        job.hostPid = info.Pid;
        if (ownCgroup) job.joinCgroup(cgroupName);
      }
      job.markStarted();
      await ended;
      // The stream may end a moment before the engine has recorded the exit code.
      for (info = await exec.inspect(); info.Running; info = await exec.inspect()) await sleep(20);
      return { exitCode: info.ExitCode, signal: null, oomKilled: false };
    });
  }

  /** A job that is a container of its own (GPU jobs): removed once it ended. */
  static inOwnContainer(docker: Docker, config: Docker.ContainerCreateOptions, options: ExecOptions): DockerProcess {
    return new DockerProcess(options.output, options.limits, async (job) => {
      const container = await docker.createContainer(config);
      job.ownContainer = container;
      try {
        const stream = await container.attach({ stream: true, stdout: true, stderr: true });
        container.modem.demuxStream(stream, job.sink.stream('stdout'), job.sink.stream('stderr'));
        await container.start();
        job.hostPid = (await container.inspect()).State.Pid;
        job.markStarted();
        await container.wait();
        const state = (await container.inspect()).State;
        return { exitCode: state.ExitCode, signal: null, oomKilled: state.OOMKilled };
      } finally {
        await container.remove({ force: true }).catch(() => undefined);
      }
    });
  }

  get pid(): number {
    return this.hostPid;
  }

  captured(): string {
    return this.sink.captured();
  }

  usage(): ResourceUsage {
    if (this.finalUsage) return this.finalUsage;
    if (this.cgroup) return this.cgroup.usage();
    // No per-job accounting here: the job may have used every core it was given.
    return { cpuSeconds: ((Date.now() - this.startedAt) / 1000) * this.limits.cpus, peakMemoryBytes: 0, measured: false };
  }

  async stop(graceMs: number): Promise<ExitStatus> {
    if (this.finalUsage || this.stopping) return this.exited;
    this.stopping = true;
    await Promise.race([this.started, this.exited]);
    if (this.ownContainer) {
      // The engine sends TERM, then KILL after the grace.
      await this.ownContainer.stop({ t: Math.ceil(graceMs / 1000) }).catch(() => undefined);
      return this.exited;
    }
    signalAll(this.jobPids(), 'SIGTERM');
    if ((await this.exitWithin(graceMs)) === 'exited') return this.exited;
    signalAll(this.jobPids(), 'SIGKILL');
    return this.exited;
  }

  private joinCgroup(name: string): void {
    const container = cgroupBaseOf(this.hostPid);
    try {
      if (!container) throw new Error(`the cgroups of container process ${this.hostPid} are not writable`);
      // In v2 the container's own processes move to a leaf; later execs join it (runc's answer to EBUSY).
      this.cgroup = JobCgroup.createIn(container, name, leafNames.container);
      this.cgroup.setLimits(this.limits);
      this.cgroup.join(this.hostPid);
    } catch (error) {
      // The job never ran (it waits to be moved): end its waiting shell.
      signalAll(processTree(this.hostPid), 'SIGKILL');
      throw error;
    }
  }

  private exitWithin(ms: number): Promise<'exited' | 'timeout'> {
    const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms).unref());
    return Promise.race([this.exited.then(() => 'exited' as const), timer]);
  }

  private jobPids(): number[] {
    const pids = new Set(this.hostPid > 0 ? processTree(this.hostPid) : []);
    for (const pid of this.cgroup?.pids() ?? []) pids.add(pid);
    return [...pids];
  }
}
