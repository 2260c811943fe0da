/**
 * The contract every sandbox backend keeps (bubblewrap, Docker, Slurm). A backend
 * creates one isolated environment per run (or per grading) and runs jobs in it:
 * - no network, ever;
 * - only the listed mounts are visible besides the operating system's read-only files,
 *   and only `readOnly: false` mounts are writable, plus a private /tmp;
 * - every process a job starts, including ones it detaches, can be stopped (TERM, then KILL);
 * - CPU time and peak memory of a job are measured where the host allows it.
 */
export interface Mount {
  /** Absolute host path. */
  source: string;
  /** Absolute path inside the sandbox. */
  target: string;
  readOnly: boolean;
}

export interface SandboxSpec {
  /** Label for logs and for the backend's own bookkeeping (container names, cgroups). */
  name: string;
  mounts: Mount[];
  /** Host paths that must stay invisible even where a system mount would contain them. */
  hidden: string[];
  env: Record<string, string>;
  workdir: string;
  /**
   * Ceiling on everything running in the sandbox at once, where the backend limits the
   * sandbox as a whole (Docker: the container); each job still has its own limits.
   */
  limits?: Omit<ResourceLimits, 'gpus'>;
  /** A grading's sandbox rather than a run's: backends that submit jobs (Slurm) use grading's partition. */
  grading?: boolean;
}

export interface ResourceLimits {
  cpus: number;
  memoryBytes: number;
  pids: number;
  /** Host GPU indices handed to this job; empty for CPU jobs. */
  gpus: number[];
}

/**
 * Where a job's output goes (a job log). Its `write` is called with stdout and stderr as
 * they come, in order, and must not block: the job's pipe is drained whatever it writes.
 */
export interface OutputSink {
  write(chunk: Buffer): void;
}

export interface ExecOptions {
  /** argv; run as is, no shell unless the caller asks for one. */
  command: string[];
  limits: ResourceLimits;
  env?: Record<string, string>;
  /**
   * Where stdout and stderr go: a sink (both streams, e.g. a job log), or `{ captureBytes }`
   * to keep the first bytes of stdout in memory and drop the rest (stderr is dropped): for
   * short runs of untrusted code whose output is data.
   */
  output: OutputSink | { captureBytes: number };
  /** Unique job tag, for cgroup and container names. */
  tag: string;
  /**
   * GPUs the backend's own scheduler finds for the job, where it has one (see
   * {@link SandboxBackend.scheduler}); `limits.gpus` is then empty.
   */
  gpuCount?: number;
  /**
   * The job's time limit, where it has one. The job manager stops the job itself when it
   * passes; a backend that submits jobs (Slurm's `--time`) gives it to its scheduler as a backstop.
   */
  timeoutMs?: number;
}

export interface ExitStatus {
  exitCode: number | null;
  signal: string | null;
  oomKilled: boolean;
}

export interface ResourceUsage {
  cpuSeconds: number;
  peakMemoryBytes: number;
  /** Memory in use now, where the backend measures it. */
  memoryBytes?: number;
  /** False where the host gives no per-job accounting: the caller then estimates. */
  measured: boolean;
}

export interface SandboxProcess {
  readonly pid: number;
  readonly exited: Promise<ExitStatus>;
  usage(): ResourceUsage;
  /** What was captured of stdout (with `output: { captureBytes }`), once the process exited. */
  captured(): string;
  /** TERM to every process of the job, KILL to whatever is left after `graceMs`. */
  stop(graceMs: number): Promise<ExitStatus>;
  /**
   * Why the job has not started yet, where it waits in a queue (the server's GPU queue, a
   * Slurm partition); undefined once it runs. Nothing is charged while it waits.
   */
  waiting?(): string | undefined;
  /** When it began to run, where it may wait first; undefined while it waits. GPU time counts from here. */
  runningSince?(): number | undefined;
}

export interface SandboxInstance {
  readonly spec: SandboxSpec;
  exec(options: ExecOptions): SandboxProcess;
  /** Stops whatever still runs in it and releases what the backend holds. */
  destroy(): Promise<void>;
}

/** What a backend that runs jobs on a cluster's nodes and queues them there (Slurm) tells the server. */
export interface ClusterScheduler {
  /** Most GPUs one job can be given (the largest node's): jobs ask with `ExecOptions.gpuCount` and wait in the cluster's queue. */
  maxGpusPerJob(): number;
  /** How a job's CPU time and memory are measured, for budget_status. */
  readonly accounting: string;
}

export interface SandboxBackend {
  readonly name: string;
  /**
   * Set by backends whose jobs run on a cluster that schedules them (Slurm): the server's own
   * GPU queue (`serve --gpus`) and its limits sized to this host step aside.
   */
  readonly scheduler?: ClusterScheduler;
  /** Why this backend cannot run here, or undefined when it can. */
  unavailableReason(): Promise<string | undefined>;
  /**
   * What this host lacks that the backend would use, though it can run without it (e.g. no
   * writable cgroups: jobs run without limits, compute charged as wall time; or a cgroup setting
   * that makes every job start wait for the kernel); undefined when nothing.
   */
  hostCheck(): string | undefined;
  create(spec: SandboxSpec): Promise<SandboxInstance>;
  /**
   * After a crash: stops and removes what servers that are gone left behind (cgroups,
   * containers); what a live server owns is left alone. Resolves with what it removed.
   */
  sweep(ownerAlive: (owner: string) => boolean): Promise<string[]>;
  /** Releases what the backend holds for its owner once every sandbox of it is destroyed (the server stops). */
  dispose(): Promise<void>;
}
