import { mkdirSync } from 'node:fs';
import { CappedLog, defaultLogCap, type LogCap, type LogCut } from './capped-log.js';
import { isStoreFull } from '../store/disk-full.js';
import type { ClusterScheduler, ExitStatus, ResourceLimits, SandboxInstance, SandboxProcess } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';
import { GpuMonitor } from './gpu-usage.js';
import { traceJobVariable } from './job-trace.js';
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
  /** Keeps a training job's trace once it has exited, while its run's workspace is still mounted (src/jobs/job-trace.ts). */
  keepTrace?: (jobId: number) => void;
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

/** How often the end of a job is written again while the store is full. */
const storeRetryMs = 1000;
/**
 * How long a job's end is written again before it is given up (to the server's log): a store that stays full or keeps
 * failing (SQLITE_IOERR) must not hold the job, and the server's stop waiting on it, for ever.
 */
const storeRetryForMs = 10 * 60_000;

/**
 * Starts jobs in sandboxes, samples their usage into the store, stops them (TERM, then
 * KILL), and writes their end state. One per server process; jobs of all runs.
 */
export class JobManager {
  private readonly live = new Map<number, LiveJob>();
  private readonly gpuMonitor = new GpuMonitor();
  /** Set once the server stops ({@link stopAll}): a job's end the store cannot take is then not written again. */
  private stopping = false;

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

  /** Whether a running job is being stopped (cancelled, timed out, over budget): its process tree is ending. */
  isStopping(id: number): boolean {
    return this.live.get(id)?.stop !== undefined;
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
    let jobId: number | undefined;
    // Called from the job's output handler: nothing may be thrown out of it (that would end the server).
    const onCut = (cut: LogCut) => {
      this.logger.error({ job: jobId, run: request.runId, ...cut }, "a job's log was cut: its file could not be written");
      try {
        request.record('job', 'log_cut', { job_id: jobId, error: cut.error, at_bytes: cut.atBytes });
      } catch (error) {
        this.logger.error({ err: error, job: jobId, run: request.runId }, 'the cut of a job log could not be recorded');
      }
    };
    const openLog = (path: string) => {
      try {
        mkdirSync(request.logDir, { recursive: true });
        log = new CappedLog(path, this.logCap, onCut);
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
    jobId = id;
    const launch = (gpus: number[], gpuCount?: number) =>
      request.sandbox.exec({
        command: request.argv,
        limits: { ...request.limits, gpus },
        // A training job's Python traces what it ran into a file named by the job (src/jobs/job-trace.ts).
        env: request.kind === 'training' ? { ...request.env, [traceJobVariable]: String(id) } : request.env,
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
    this.recordOrLog(request, 'started', {
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

  /**
   * Stops a running job (TERM, then KILL after `graceMs`; 0: KILL at once) and resolves with its final row; a finished
   * job is returned as is. It keeps its slot and its memory until its processes are gone (`Run.assertCanStart`).
   */
  async stop(id: number, state: JobState, reason: string, graceMs = stopGraceMs): Promise<JobRow> {
    const job = this.live.get(id);
    if (!job) return this.store.getJob(id)!;
    job.stop ??= { state, reason };
    await job.process.stop(graceMs);
    return job.done;
  }

  async stopRun(runId: string, state: JobState, reason: string, kinds?: readonly JobKind[]): Promise<void> {
    const targets = [...this.live].filter(([, job]) => job.request.runId === runId && (!kinds || kinds.includes(job.request.kind)));
    await Promise.all(targets.map(([id]) => this.stop(id, state, reason)));
  }

  async stopAll(reason: string): Promise<void> {
    this.stopping = true;
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
    try {
      job.request.keepTrace?.(id);
    } catch (error) {
      // The trace only labels the report's route: a job's record never waits on it.
      this.logger.warn({ job: id, err: error }, "could not keep the job's trace");
    }
    const endedAt = Date.now();
    if (job.log.cut) {
      const cut = `its log was cut after ${job.log.cut.atBytes} bytes: the server could not write it (${job.log.cut.error})`;
      reason = reason ? `${reason}; ${cut}` : cut;
    }
    const end = {
      state,
      reason,
      exit_code: status.exitCode,
      signal: status.signal,
      cpu_s: usage.cpuSeconds,
      gpu_s: gpuSeconds(job, endedAt),
      episodes_done: collected.episodesDone ?? null,
      result: collected.result === undefined ? null : JSON.stringify(collected.result),
      ended_at: endedAt,
    };
    if (!(await this.writeWhileStoreFull(id, () => this.store.finishJob(id, end)))) {
      // Its row stays `running` until a later server marks it lost (src/core/ownership.ts): the end survives only here.
      this.logger.error({ job: id, run: job.request.runId, ...end }, "a job's end was given up unrecorded: the store never took it");
    }
    this.live.delete(id);
    const row = this.store.getJob(id)!;
    this.recordOrLog(job.request, 'finished', {
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
      ...(job.log.cut ? { log_cut: job.log.cut } : {}),
    });
    this.logger.info({ job: id, state, exit: status.exitCode }, 'job finished');
    return row;
  }

  /**
   * Records a job event; one the store cannot take (a full disk) goes to the server's log instead. The job's row,
   * written apart, stays its record; an event lost here must not fail the job or the call that started it.
   */
  private recordOrLog(request: JobRequest, name: string, data: Record<string, unknown>): void {
    try {
      request.record('job', name, data);
    } catch (error) {
      if (!isStoreFull(error)) throw error;
      this.logger.error({ err: error, run: request.runId, event: `job/${name}`, ...data }, 'a job event could not be recorded');
    }
  }

  /**
   * Writes a job's end, again every {@link storeRetryMs} while the store is full, so that the job ends on record when
   * space returns; false once it gave up: after {@link storeRetryForMs}, or once the server stops.
   */
  private async writeWhileStoreFull(id: number, write: () => void): Promise<boolean> {
    const giveUpAt = Date.now() + storeRetryForMs;
    for (let tries = 1; ; tries++) {
      try {
        write();
        return true;
      } catch (error) {
        if (!isStoreFull(error)) throw error;
        if (tries === 1)
          this.logger.error(
            { err: error, job: id },
            `a job's end could not be recorded: written again every second until the store has room, for at most ${storeRetryForMs / 60_000} minutes`,
          );
        if (this.stopping || Date.now() >= giveUpAt) return false;
        await new Promise((resolve) => setTimeout(resolve, storeRetryMs));
      }
    }
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
