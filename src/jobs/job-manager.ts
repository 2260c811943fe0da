import { mkdirSync } from 'node:fs';
import { CappedLog, defaultLogCap, type LogCap } from './capped-log.js';
import type { ClusterScheduler, ExitStatus, ResourceLimits, SandboxInstance, SandboxProcess } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';
import { GpuMonitor } from './gpu-usage.js';
import { GpuAllocator, GpuQueuedProcess } from './gpu-allocator.js';
import type { Logger } from '../util/logger.js';
import type { RecordEvent } from '../store/events.js';
import type { JobKind, JobRow, JobState, Store } from '../store/store.js';

export interface JobRequest {
  runId: string;
  kind: JobKind;
  /** What the job runs, as shown to the agent and recorded. */
  command: string;
  argv: string[];
  sandbox: SandboxInstance;
  limits: ResourceLimits;
  /**
   * GPUs the job needs: it waits in the server's GPU queue until they are free, or, where
   * the sandbox backend schedules GPUs itself (Slurm), in the backend's queue.
   */
  gpuCount?: number;
  /** Whether the job's compute counts against the run's budget (grading does not). */
  charged: boolean;
  episodesRequested?: number;
  timeoutMs?: number;
  env?: Record<string, string>;
  logDir: string;
  record: RecordEvent;
  /**
   * Reads (and may complete) what the job produced once it has exited: how many episodes a
   * rollout wrote, their rewards from a judge. The job stays running until it resolves.
   */
  collect?: (state: JobState, cost: JobCost) => Promise<Collected> | Collected;
}

/** What an exited job cost: its CPU time and how long it ran. */
export interface JobCost {
  cpuSeconds: number;
  wallSeconds: number;
}

export interface Collected {
  episodesDone?: number;
  result?: unknown;
}

interface LiveJob {
  request: JobRequest;
  process: SandboxProcess;
  log: CappedLog;
  startedAt: number;
  /** The last resource sample recorded: CPU rates are measured between samples. */
  lastSample: { at: number; cpuSeconds: number };
  /** Set when the server stops the job, so the exit is reported as what it was. */
  stop?: { state: JobState; reason: string };
  timer?: NodeJS.Timeout;
  done: Promise<JobRow>;
}

/** Grace between TERM and KILL when the server stops a job. */
export const stopGraceMs = 5000;

/** How often a running job's resources are recorded as a `sample` event. */
export const resourceSampleMs = 5000;

/**
 * Starts jobs in sandboxes, samples their usage into the store, stops them (TERM, then
 * KILL), and writes their end state. One per server process; jobs of all runs.
 */
export class JobManager {
  private readonly live = new Map<number, LiveJob>();
  private readonly gpuMonitor = new GpuMonitor();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly owner: string,
    readonly gpus = new GpuAllocator([]),
    /** What each job's log keeps of its output. */
    readonly logCap: LogCap = defaultLogCap,
    /** The backend's scheduler where it queues GPU jobs itself: the server's GPU queue then stays empty. */
    private readonly scheduler?: ClusterScheduler,
  ) {}

  /** The most GPUs one training or rollout job can be given. */
  gpusPerJob(): number {
    return this.scheduler ? this.scheduler.maxGpusPerJob() : this.gpus.poolSize('jobs');
  }

  /**
   * GPUs a grading that can use them is given: grading's own slot (all of it: one GPU with two or more, the shared one
   * with one), or one of the cluster's; none on a server without GPUs.
   */
  gradingGpus(): number {
    return this.scheduler ? Math.min(1, this.scheduler.maxGpusPerJob()) : this.gpus.poolSize('grading');
  }

  /** How jobs' compute is measured, for budget_status. */
  get accounting(): string {
    return this.scheduler?.accounting ?? "each job's cgroup on the server's host (where cgroups are not writable: wall time × cores)";
  }

  /** Why a running job has not started yet (queued for GPUs, pending in Slurm), or undefined. */
  waitingReason(id: number): string | undefined {
    return this.live.get(id)?.process.waiting?.();
  }

  /** Jobs of all runs running in this process now. */
  get runningCount(): number {
    return this.live.size;
  }

  /** Jobs of the given kinds, of all runs, running in this process now. */
  runningOfKinds(kinds: readonly JobKind[]): number {
    return [...this.live.values()].filter((job) => kinds.includes(job.request.kind)).length;
  }

  /**
   * Starts a job: its row and its log come into being together (a log that cannot be opened refuses the start with
   * nothing recorded), then the sandbox runs it.
   */
  start(request: JobRequest): JobRow {
    const now = Date.now();
    // Opened by insertJob, which throws when it cannot be.
    let log!: CappedLog;
    const openLog = (path: string) => {
      try {
        mkdirSync(request.logDir, { recursive: true });
        log = new CappedLog(path, this.logCap);
      } catch (error) {
        throw new A2rlError(
          'UNAVAILABLE',
          `The job was not started: the server could not open its log (${(error as NodeJS.ErrnoException).code ?? 'error'}). Nothing ran, and nothing was recorded or charged; try again, and report it if it persists.`,
          { cause: error },
        );
      }
    };
    const row = this.store.insertJob(
      {
        run_id: request.runId,
        kind: request.kind,
        command: request.command,
        resources: JSON.stringify({ ...request.limits, timeout_ms: request.timeoutMs ?? null }),
        charged: request.charged ? 1 : 0,
        episodes_requested: request.episodesRequested ?? 0,
        owner: this.owner,
        created_at: now,
      },
      request.logDir,
      openLog,
    );
    const { id } = row;
    const launch = (gpus: number[], gpuCount?: number) =>
      request.sandbox.exec({
        command: request.argv,
        limits: { ...request.limits, gpus },
        env: request.env,
        output: log,
        tag: `job-${id}`,
        gpuCount,
        timeoutMs: request.timeoutMs,
      });
    let process: SandboxProcess;
    try {
      if (request.gpuCount && this.scheduler) process = launch([], request.gpuCount);
      else if (request.gpuCount) {
        process = new GpuQueuedProcess(this.gpus, request.kind === 'grading' ? 'grading' : 'jobs', request.gpuCount, launch);
      } else process = launch(request.limits.gpus);
    } catch (error) {
      log.close();
      this.store.finishJob(id, { ...noUsage, state: 'failed', reason: `could not start: ${String(error)}`, ended_at: Date.now() });
      throw new A2rlError(
        'SANDBOX_UNAVAILABLE',
        `The job could not start in the sandbox (${String(error)}); nothing ran and nothing was charged.`,
        {
          cause: error,
        },
      );
    }
    const job: LiveJob = {
      request,
      process,
      log,
      startedAt: now,
      lastSample: { at: now, cpuSeconds: 0 },
      done: undefined as unknown as Promise<JobRow>,
    };
    job.done = process.exited.then((status) => this.finish(id, job, status));
    if (request.timeoutMs !== undefined) {
      job.timer = setTimeout(
        () => void this.stop(id, 'timed_out', `ran past its time limit of ${Math.round(request.timeoutMs! / 1000)} s`),
        request.timeoutMs,
      );
    }
    this.live.set(id, job);
    request.record('job', 'started', {
      job_id: id,
      kind: request.kind,
      command: request.command,
      limits: request.limits,
      charged: request.charged,
      log_path: row.log_path,
    });
    this.logger.info({ job: id, run: request.runId, kind: request.kind }, 'job started');
    return this.store.getJob(id)!;
  }

  /**
   * Writes the latest CPU (and GPU) seconds of every running job into the store, and every
   * `resourceSampleMs` records a resource sample of it (CPU, memory, GPU where it has one).
   */
  sample(): void {
    const now = Date.now();
    for (const [id, job] of this.live) {
      const usage = job.process.usage();
      this.store.updateJobUsage(id, usage.cpuSeconds, gpuSeconds(job, now));
      if (now - job.lastSample.at < resourceSampleMs) continue;
      const cpuPercent = (100 * (usage.cpuSeconds - job.lastSample.cpuSeconds)) / ((now - job.lastSample.at) / 1000);
      job.lastSample = { at: now, cpuSeconds: usage.cpuSeconds };
      const gpus = this.gpuMonitor.readings(job.request.limits.gpus);
      job.request.record('sample', 'resources', {
        job_id: id,
        cpu_s: Math.round(usage.cpuSeconds * 1000) / 1000,
        cpu_percent: Math.round(cpuPercent * 10) / 10,
        cpu_measured: usage.measured,
        memory_bytes: usage.memoryBytes ?? null,
        peak_memory_bytes: usage.peakMemoryBytes,
        ...(gpus.length > 0 ? { gpus } : {}),
      });
    }
  }

  /** Stops a running job and resolves with its final row; a finished job is returned as is. */
  async stop(id: number, state: JobState, reason: string): Promise<JobRow> {
    const job = this.live.get(id);
    if (!job) return this.store.getJob(id)!;
    job.stop ??= { state, reason };
    await job.process.stop(stopGraceMs);
    return job.done;
  }

  async stopRun(runId: string, state: JobState, reason: string, kinds?: readonly JobKind[]): Promise<void> {
    const targets = [...this.live].filter(([, job]) => job.request.runId === runId && (!kinds || kinds.includes(job.request.kind)));
    await Promise.all(targets.map(([id]) => this.stop(id, state, reason)));
  }

  async stopAll(reason: string): Promise<void> {
    await Promise.all([...this.live.keys()].map((id) => this.stop(id, 'cancelled', reason)));
  }

  /** Resolves when the job ends or after `ms` (Infinity: when it ends), with its current row. */
  async wait(id: number, ms: number): Promise<JobRow> {
    const job = this.live.get(id);
    if (job && ms === Number.POSITIVE_INFINITY) await job.done;
    else if (job && ms > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([job.done, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
      clearTimeout(timer);
    }
    if (this.live.has(id)) this.sample();
    return this.store.getJob(id)!;
  }

  private async finish(id: number, job: LiveJob, status: ExitStatus): Promise<JobRow> {
    clearTimeout(job.timer);
    job.log.close();
    const usage = job.process.usage();
    let { state, reason } = job.stop ?? classify(status, job.request.limits);
    let collected: Collected = {};
    try {
      collected = (await job.request.collect?.(state, { cpuSeconds: usage.cpuSeconds, wallSeconds: ranSeconds(job, Date.now()) })) ?? {};
    } catch (error) {
      this.logger.warn({ job: id, err: error }, 'could not collect job output');
      state = 'failed';
      reason = `its output could not be processed: ${(error as Error).message}`;
      // What could not be counted is charged as reserved: an agent cannot spoil its output to be charged less.
      collected = { episodesDone: job.request.episodesRequested };
    }
    const endedAt = Date.now();
    this.store.finishJob(id, {
      state,
      reason,
      exit_code: status.exitCode,
      signal: status.signal,
      cpu_s: usage.cpuSeconds,
      gpu_s: gpuSeconds(job, endedAt),
      episodes_done: collected.episodesDone ?? null,
      result: collected.result === undefined ? null : JSON.stringify(collected.result),
      ended_at: endedAt,
    });
    this.live.delete(id);
    const row = this.store.getJob(id)!;
    job.request.record('job', 'finished', {
      job_id: id,
      kind: row.kind,
      state,
      reason,
      exit_code: status.exitCode,
      charged: row.charged === 1,
      cpu_s: row.cpu_s,
      gpu_s: row.gpu_s,
      episodes_done: row.episodes_done,
      log_path: row.log_path,
      peak_memory_bytes: usage.peakMemoryBytes,
      cpu_measured: usage.measured,
      duration_s: (endedAt - job.startedAt) / 1000,
    });
    this.logger.info({ job: id, state, exit: status.exitCode }, 'job finished');
    return row;
  }
}

const noUsage = { exit_code: null, signal: null, cpu_s: 0, gpu_s: 0, episodes_done: null, result: null };

/**
 * GPUs are held whole for the job's life: GPU-seconds are wall seconds times GPUs, from when
 * the job began to run (a queue, the server's or the backend's, costs nothing).
 */
function gpuSeconds(job: LiveJob, now: number): number {
  return ranSeconds(job, now) * (job.request.gpuCount ?? job.request.limits.gpus.length);
}

/** Seconds the job has run until `now`, from when it began to run (not while it waited in a queue). */
function ranSeconds(job: LiveJob, now: number): number {
  const since = job.process.runningSince ? job.process.runningSince() : job.startedAt;
  return since === undefined ? 0 : Math.max(0, now - since) / 1000;
}

function classify(status: ExitStatus, limits: ResourceLimits): { state: JobState; reason: string | null } {
  if (status.oomKilled) {
    return {
      state: 'oom_killed',
      reason: `killed: out of memory (limit ${Math.round(limits.memoryBytes / 2 ** 20)} MiB); use smaller batches or ask for more memory`,
    };
  }
  if (status.exitCode === 0) return { state: 'succeeded', reason: null };
  if (status.signal) return { state: 'failed', reason: `killed by ${status.signal}` };
  if (status.exitCode !== null && status.exitCode > 128) return { state: 'failed', reason: `killed by signal ${status.exitCode - 128}` };
  return { state: 'failed', reason: `exited with code ${status.exitCode}; read the end of its log with job_logs` };
}
