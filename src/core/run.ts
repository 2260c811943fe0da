import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ResourceLimits, SandboxInstance } from '../../sandbox/contract.js';
import { type BudgetLimits, type BudgetReport, budgetReport } from '../tasks/budget.js';
import { formatDuration } from '../util/duration.js';
import { codeSnapshotsOf, recordCodeSnapshot } from '../store/code-snapshots.js';
import { measureRunFolder } from '../../sandbox/run-storage.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import { TokenBucket } from '../util/token-bucket.js';
import type { RecordEvent } from '../store/events.js';
import type { JobRequest } from '../jobs/job-manager.js';
import { keepJobTrace } from '../jobs/job-trace.js';
import type { GradeRow, JobKind, JobRow, JobState, RunRow, SubmissionRow } from '../store/store.js';
import type { Task } from '../tasks/task.js';
import type { Judge } from '../grading/judge/judge.js';
import type { GradingStatus } from '../grading/grader.js';
import { type Snapshot, discardSnapshot, snapshotDirectory } from '../store/submission-snapshots.js';
import type { SafeDir } from '../util/safe-fs.js';
import type { Logger } from '../util/logger.js';
import type { SearchChannel } from '../search/channel.js';
import type { RunServices } from './services.js';
import { type GradedSubmission, gradedSubmissions, startGrading } from './submissions.js';
import type { Workspace } from './workspace.js';

/** Most long jobs one run may have running at once. */
export const maxConcurrentJobs = 3;

/**
 * Most exec commands one run may have running at once: a quick look beside another one (agents call tools in
 * parallel), never a fleet of sandboxes. Each holds the task's full per-job memory.
 */
export const maxConcurrentExecs = 2;

/**
 * What a run's running jobs may hold together, in the task's per-job limits: its long jobs and one exec, the room the
 * engine gives the run's sandbox as a whole (`serveRun`). A job that would pass it is refused, not squeezed.
 */
export const runJobsRoom = maxConcurrentJobs + 1;

/**
 * How long an exec waits for one of the server's exec slots (`--max-execs`) before it is refused as BUSY: execs end
 * within seconds, so a burst of many runs' calls is served in turn. With the 45 s an exec may run, under clients' 60 s.
 */
export const execSlotWaitMs = 5000;

/** Most files and folders a run may hold on the host (its inodes); past it, new work is refused as over the quota. */
export const maxWorkspaceEntries = 200_000;

/** The last measurement of a run's disk account. */
export interface DiskReading {
  /** Bytes: the run's folder (workspace, job logs) as walked, plus what it stored in the server's shared stores. */
  used: number;
  /** Files and folders in the run's folder. */
  entries: number;
  /** When it was measured (ms since the epoch); 0 before the first measurement. */
  measuredAt: number;
  /** When its walk started: only a walk that started after a job did has seen what the job wrote. */
  walkStartedAt: number;
  /** Why part of the run's folder could not be measured: the account then fails closed, as over the quota. */
  unmeasured?: string;
}

/** The agent's jobs that run for long: they count against the per-run and server-wide job limits; exec has limits of its own. */
export const longJobKinds = ['training', 'rollouts'] as const;

/** Jobs the agent starts and the budget pays for; grading is the server's. */
export const agentJobKinds = ['exec', 'training', 'rollouts'] as const;

/**
 * One attempt of one agent at one task under one budget. The run outlives MCP sessions;
 * its state lives in the store, and this object holds what a live server needs for it.
 */
export class Run {
  private enforcing = false;
  private diskReading: DiskReading = { used: 0, entries: 0, measuredAt: 0, walkStartedAt: 0 };
  /** Each running exec's lowest disk reading from walks that started after it: over the quota, it stops only if it grew past that. */
  private readonly execDiskLows = new Map<number, number>();
  /** The walk in flight: never more than one per run. */
  private measuring: Promise<DiskReading> | undefined;
  /** The walk that starts when the one in flight ends, shared by everyone who asked meanwhile. */
  private nextMeasuring: Promise<DiskReading> | undefined;
  /** When the budget check measures next: a slow walk is repeated less often. */
  private nextDiskCheckAt = 0;
  private readonly calls: TokenBucket;
  /** Set once the ended run's workspace image is unmounted (its contamination check done): its files are not there to see. */
  private workspaceClosed = false;

  constructor(
    private readonly services: RunServices,
    readonly row: RunRow,
    readonly task: Task,
    readonly limits: BudgetLimits,
    readonly workspace: Workspace,
    readonly sandbox: SandboxInstance,
    readonly instructions: string,
    readonly record: RecordEvent,
    /** The run's search channel, where its budget allows search queries. */
    readonly search?: SearchChannel,
  ) {
    this.calls = new TokenBucket(services.limits.callsPerSecond, 2 * services.limits.callsPerSecond);
    search?.admitThrough(this);
  }

  /** Why the sandbox may make no search query now (the channel counts the queries themselves), or undefined. */
  searchRefusal(): A2rlError | undefined {
    const { row, budget } = this.status();
    if (row.state === 'ended') return new A2rlError('RUN_ENDED', `This run has ended (${row.end_reason}); no search can be made.`);
    if (budget.wall_seconds.left <= 0) return new A2rlError('BUDGET_EXHAUSTED', 'The wall-clock budget is spent; the run is over.');
    return undefined;
  }

  /**
   * Admits one tool call, or refuses it past the run's call rate (a looping agent cannot flood the server) or while the
   * home's disk is too full to record it (it must not act unrecorded).
   */
  admitCall(): void {
    this.services.room.require();
    const waitMs = this.calls.take();
    if (waitMs > 0) {
      throw new A2rlError(
        'RATE_LIMITED',
        `Too many calls: this run may make ${this.calls.ratePerSecond} per second (bursts of ${this.calls.burst}). Nothing was done; retry in ${Math.max(0.1, waitMs / 1000).toFixed(1)} s, and slow down (e.g. wait for jobs with job_status wait_seconds instead of polling).`,
      );
    }
  }

  get id(): string {
    return this.row.id;
  }

  /** Called as the ended run's workspace image is unmounted: the file tools refuse from then on ({@link assertWorkspaceOpen}). */
  closeWorkspace(): void {
    this.workspaceClosed = true;
  }

  /**
   * Refuses a file tool where it would not act on the run's files: a write once the run ended (its files are final, and
   * its image may be unmounted, leaving the bare mount point on the home's disk), a read once the image is unmounted
   * (it would see an empty folder).
   */
  assertWorkspaceOpen(access: 'read' | 'write'): void {
    if (access === 'read' && !this.workspaceClosed) return;
    const run = this.services.store.getRun(this.id)!;
    if (run.state !== 'ended') return;
    throw new A2rlError(
      'RUN_ENDED',
      `This run has ended (${run.end_reason}): its workspace is closed, ${access === 'write' ? 'and nothing more is written to it' : 'its files are no longer served'}. Read your results with get_score.`,
    );
  }

  get dir(): string {
    return this.row.dir;
  }

  get state(): RunRow['state'] {
    return this.services.store.getRun(this.id)!.state;
  }

  get home(): string {
    return this.services.home;
  }

  get logger(): Logger {
    return this.services.logger;
  }

  /** The judge of this server's judge-graded tasks (and of judged rollouts). */
  get judge(): Judge {
    return this.services.grader.judge;
  }

  /** GPUs the server (or the cluster its backend submits to) can give one training or rollout job. */
  gpuPool(): number {
    return this.services.jobs.gpusPerJob();
  }

  /** A job's GPU request, checked against what one job can get. */
  checkGpuRequest(gpus: number): number {
    const pool = this.gpuPool();
    if (gpus > pool) {
      throw new A2rlError(
        'INVALID_INPUT',
        pool === 0
          ? `This server has no GPUs for task ${this.task.id}; start the job with gpus: 0 (it runs on CPU).`
          : `This server has ${pool} GPU(s) for one job; ask for at most ${pool}.`,
      );
    }
    return gpus;
  }

  /** How this run's compute is measured (a job's cgroup here, or on a cluster node). */
  get computeAccounting(): string {
    return this.services.jobs.accounting;
  }

  /** Why one of this run's running jobs has not started yet (queued for GPUs, pending in Slurm), or undefined. */
  jobWaiting(id: number): string | undefined {
    return this.services.jobs.waitingReason(id);
  }

  /** This run's jobs of the given kinds, oldest first. */
  listJobs(kinds: readonly JobKind[] = agentJobKinds): JobRow[] {
    return this.services.store.listJobs(this.id, kinds);
  }

  /** One of this run's agent jobs (never a grading) by the number the agent knows it by, or undefined. */
  agentJob(seq: number): JobRow | undefined {
    return this.services.store.getJobBySeq(this.id, seq);
  }

  /** Waits up to `ms` for a job to end; resolves with its row either way. */
  waitForJob(id: number, ms: number): Promise<JobRow> {
    return this.services.jobs.wait(id, ms);
  }

  /** Stops one of the agent's jobs (TERM, then KILL) at its request. */
  cancelJob(id: number): Promise<JobRow> {
    return this.services.jobs.stop(id, 'cancelled', 'cancelled by the agent');
  }

  /** Brings every running job's CPU figure up to date. */
  sampleJobs(): void {
    this.services.jobs.sample();
  }

  listSubmissions(): SubmissionRow[] {
    return this.services.store.listSubmissions(this.id);
  }

  /** One of this run's submissions by the number the agent knows it by, or undefined. */
  submission(seq: number): SubmissionRow | undefined {
    return this.services.store.getSubmissionBySeq(this.id, seq);
  }

  /** The stored grade of some content of this run's task, once graded. */
  cachedGrade(contentHash: string): GradeRow | undefined {
    return this.services.grader.cached(this.task, contentHash);
  }

  /** The untouched base model's grade, once graded. */
  baselineGrade(): GradeRow | undefined {
    return this.cachedGrade(this.task.baseModelHash);
  }

  /** Where the base model's grading stands: graded, in flight, failed with the reason (a GPU it cannot use), or not started. */
  baselineStatus(): GradingStatus {
    return this.services.grader.status(this.task, this.task.baseModelHash);
  }

  /** This run's graded submissions in order, with both scores. */
  gradedSubmissions(): GradedSubmission[] {
    return gradedSubmissions(this.services.store, this.row);
  }

  /**
   * Starts one of the agent's jobs in the run's sandbox, charged to its budget. A job started for a tool call that
   * waits on it (exec) is given the call's `signal`: the client cancelling the call stops the job, process tree and all.
   */
  async startJob(
    kind: 'exec' | 'training' | 'rollouts',
    job: Pick<JobRequest, 'command' | 'argv' | 'limits' | 'gpuCount' | 'timeoutMs' | 'episodesRequested' | 'collect' | 'env'>,
    signal?: AbortSignal,
  ): Promise<JobRow> {
    // exec stays allowed over the quota (it is how the agent deletes files): only long jobs need a fresh figure.
    if (kind !== 'exec') await this.measureDisk();
    for (const deadline = Date.now() + execSlotWaitMs; ; await sleep(50)) {
      // The answer is never sent (the SDK drops a cancelled call's): the code only keeps it apart from the tool's failures.
      if (signal?.aborted) throw new A2rlError('CONFLICT', 'The client cancelled this call before its job started; nothing was run.');
      try {
        this.assertCanStart(kind, job.episodesRequested, job.limits.memoryBytes);
        break;
      } catch (error) {
        // Only the server's exec slots and the run's slots held by jobs being stopped (a cancelled exec, killed at once)
        // are waited for; every other refusal is answered at once.
        const waited = isA2rlError(error, 'BUSY') || (isA2rlError(error, 'CONFLICT') && this.stoppingJobs());
        if (kind !== 'exec' || !waited || Date.now() >= deadline) throw error;
      }
    }
    const started = await this.services.jobs.start({
      ...job,
      runId: this.id,
      kind,
      sandbox: this.sandbox,
      charged: true,
      logDir: join(this.dir, 'logs'),
      record: this.record,
      keepTrace: kind === 'training' ? (jobId) => keepJobTrace(this.dir, this.workspace.root, jobId) : undefined,
    });
    // Killed at once (no TERM grace), not at its timeout: its side effects stop with it and its exec slot is free for
    // the next call as soon as its processes are gone.
    const cancel = () =>
      void this.services.jobs
        .stop(started.id, 'cancelled', 'the client cancelled the call', 0)
        .catch((error: unknown) =>
          this.logger.error({ err: error, run: this.id, job: started.id }, 'a cancelled job could not be stopped'),
        );
    if (signal?.aborted) cancel();
    else signal?.addEventListener('abort', cancel, { once: true });
    return started;
  }

  /** Snapshots the workspace's code/ folder into the server's content-addressed store, recorded against a job or submission. */
  snapshotCode(trigger: { job_id: number } | { submission_id: number }): string | undefined {
    return recordCodeSnapshot(codeSnapshotsOf(this.home), () => this.workspace.openDir('code'), this.record, trigger);
  }

  /**
   * Snapshots a checkpoint folder and queues it for grading. Identical content submitted
   * again returns the earlier submission (not graded twice, not counted twice). A refused
   * submission leaves nothing behind.
   */
  async submit(path: string, note: string | undefined): Promise<{ submission: SubmissionRow; duplicate: boolean }> {
    const run = this;
    run.assertCanStart('submission');
    const { services, task } = run;
    const capReached = () =>
      new A2rlError(
        'BUDGET_EXHAUSTED',
        `All ${run.limits.submissions} submissions of this run are used. Your best score stands; read it with get_score.`,
      );
    // Checked before copying anything, and again atomically when the submission is inserted.
    if (run.budget().submissions.left <= 0) throw capReached();
    const target = run.workspace.resolve(path, 'read');
    let folder: SafeDir;
    try {
      folder = run.workspace.openDir(target);
    } catch (error) {
      if (isA2rlError(error, 'NOT_FOUND')) {
        throw new A2rlError(
          'NOT_FOUND',
          `${target.path} does not exist. Save your checkpoint (e.g. to output/final) and submit that folder.`,
        );
      }
      throw error;
    }
    let snapshot: Snapshot;
    try {
      // Refused while the run is over its quota (or its account cannot be measured), before anything is copied; the
      // copy then counts in the run's account. The base model (read-only) is refused as unchanged instead.
      const underQuota = async () => {
        if (!target.readOnly) await run.assertUnderDiskQuota('no submission is copied');
      };
      snapshot = await snapshotDirectory(folder, target.path, join(services.home, 'submissions'), task.checkpoint, underQuota);
    } finally {
      folder.close();
    }
    if (snapshot.contentHash === task.baseModelHash) {
      discardSnapshot(snapshot);
      const baseline = run.baselineGrade();
      throw new A2rlError(
        'INVALID_INPUT',
        `${target.path} is the base model unchanged${baseline ? ` (its score, the baseline, is ${baseline.public_score})` : ''}; submitting it is refused. Train it first.`,
      );
    }
    const outcome = services.store.insertSubmissionWithin(run.limits.submissions, {
      run_id: run.id,
      path: target.path,
      note: note ?? null,
      content_hash: snapshot.contentHash,
      files: snapshot.files,
      bytes: snapshot.bytes,
      created_at: Date.now(),
    });
    if ('capReached' in outcome) {
      discardSnapshot(snapshot);
      throw capReached();
    }
    if ('existing' in outcome) {
      run.record('submission', 'duplicate', { submission_id: outcome.existing.id, path: target.path });
      return { submission: outcome.existing, duplicate: true };
    }
    run.record('submission', 'queued', {
      submission_id: outcome.inserted.id,
      path: target.path,
      content_hash: snapshot.contentHash,
      bytes: snapshot.bytes,
    });
    run.snapshotCode({ submission_id: outcome.inserted.id });
    startGrading(services, task, run, outcome.inserted);
    return { submission: services.store.getSubmission(outcome.inserted.id)!, duplicate: false };
  }

  /** Resources of one agent job: the task's defaults, narrowed where the caller asks. */
  jobLimits(request: { cpus?: number; memoryMb?: number } = {}): ResourceLimits {
    const { jobs } = this.task;
    return {
      cpus: Math.min(request.cpus ?? jobs.cpus, jobs.cpus),
      memoryBytes: Math.min(request.memoryMb ?? jobs.memoryMb, jobs.memoryMb) * 2 ** 20,
      pids: jobs.pids,
      gpus: [],
    };
  }

  /**
   * Measures the run's disk account now: its folder (workspace, job logs) walked by a thread of
   * its own, off the event loop, plus the bytes it stored in the server's shared stores
   * (submissions, code snapshots, trajectories). The figure is from a walk that started
   * after the call (one in flight may predate a deletion): callers meanwhile share the next walk.
   */
  measureDisk(): Promise<DiskReading> {
    if (!this.measuring) {
      this.measuring = this.walkDisk().finally(() => (this.measuring = undefined));
      return this.measuring;
    }
    this.nextMeasuring ??= this.measuring
      .catch(() => undefined)
      .then(() => {
        this.nextMeasuring = undefined;
        return this.measureDisk();
      });
    return this.nextMeasuring;
  }

  private async walkDisk(): Promise<DiskReading> {
    const started = Date.now();
    // A workspace that is a filesystem of its own is counted by its kernel, not walked (sandbox/run-storage.ts).
    let walked = await measureRunFolder(this.dir);
    // A folder swapped for a link mid-walk hid what it held from this walk, and an error may pass: walk again, and
    // fail closed (over the quota) if the second walk cannot measure everything either.
    if (walked.raced || walked.unmeasured !== undefined) walked = await measureRunFolder(this.dir);
    const unmeasured = walked.unmeasured ?? (walked.raced ? 'folders were swapped for links while they were measured' : undefined);
    const used = walked.bytes + this.services.store.storedBytes(this.id);
    this.diskReading = {
      used,
      entries: walked.entries,
      measuredAt: Date.now(),
      walkStartedAt: started,
      ...(unmeasured ? { unmeasured } : {}),
    };
    // A slow walk (a huge tree) costs a core of its own: the budget check repeats it at most 5% of the time.
    this.nextDiskCheckAt = Date.now() + Math.max(1000, 20 * (Date.now() - started));
    return this.diskReading;
  }

  private overDiskQuota(): boolean {
    const { entries, used, unmeasured } = this.diskReading;
    return unmeasured !== undefined || entries > maxWorkspaceEntries || used > this.services.limits.diskQuotaBytes;
  }

  /** The run's disk account at the last measurement, against the server's per-run quota, with the measurement's age. */
  disk(): { used: number; limit: number; left: number; measured_seconds_ago: number | null } {
    const limit = this.services.limits.diskQuotaBytes;
    const { used, measuredAt } = this.diskReading;
    return {
      used,
      limit,
      left: Math.max(0, limit - used),
      measured_seconds_ago: measuredAt === 0 ? null : Math.round((Date.now() - measuredAt) / 100) / 10,
    };
  }

  /** Refuses `what` while a fresh measurement finds the run over its disk quota, or unable to measure all of it. */
  async assertUnderDiskQuota(what: string): Promise<void> {
    await this.measureDisk();
    if (this.overDiskQuota()) throw this.quotaError(this.diskReading.used, what);
  }

  /** Refuses a write of `addedBytes` more that would take the run past its disk quota. */
  async assertDiskRoom(addedBytes: number): Promise<void> {
    const { used } = await this.measureDisk();
    if (addedBytes > 0 && (this.overDiskQuota() || used + addedBytes > this.services.limits.diskQuotaBytes))
      throw this.quotaError(used, 'this write is refused');
  }

  private quotaError(used: number, what: string): A2rlError {
    const mib = (bytes: number) => `${Math.ceil(bytes / 2 ** 20)} MiB`;
    const { entries, unmeasured } = this.diskReading;
    const holds =
      unmeasured !== undefined
        ? `what cannot be measured (${unmeasured}), which counts as over the quota`
        : entries > maxWorkspaceEntries
          ? `more than ${maxWorkspaceEntries} files and folders, the most it may hold`
          : `${mib(used)} and its disk quota is ${mib(this.services.limits.diskQuotaBytes)}`;
    return new A2rlError(
      'QUOTA_EXCEEDED',
      `The run's files (workspace, job logs, snapshots) hold ${holds}: ${what}. ` +
        'Delete what you no longer need (old checkpoints in output/, rollouts/) with exec, e.g. rm -r output/old, then try again.',
    );
  }

  wallSeconds(): number {
    return (Date.now() - this.row.created_at) / 1000;
  }

  budget(): BudgetReport {
    return budgetReport(this.limits, this.services.store.usage(this.id), this.wallSeconds(), this.search?.used);
  }

  /** The run's row and its budget, read together (one check of the store for changes). */
  status(): { row: Readonly<RunRow>; budget: BudgetReport } {
    const { row, usage } = this.services.store.runStatus(this.id)!;
    return { row, budget: budgetReport(this.limits, usage, this.wallSeconds(), this.search?.used) };
  }

  /**
   * Refuses new work once the run ended or the budget it needs is spent, and a job past the run's or the server's
   * concurrent jobs or the run's memory room (`memoryBytes`: the job's limit). Synchronous up to the job's insert, so
   * calls racing each other cannot all pass.
   */
  assertCanStart(kind: JobKind | 'submission', episodes = 0, memoryBytes = 0): void {
    const { row: run, budget } = this.status();
    if (run.state === 'ended') {
      throw new A2rlError('RUN_ENDED', `This run has ended (${run.end_reason}). Nothing new can start; read your results with get_score.`);
    }
    if (budget.wall_seconds.left <= 0) {
      throw new A2rlError('BUDGET_EXHAUSTED', 'The wall-clock budget is spent; the run is over. Read your results with get_score.');
    }
    if (kind === 'submission') return;
    if (budget.compute_seconds.left <= 0) {
      throw new A2rlError(
        'BUDGET_EXHAUSTED',
        `The compute budget is spent (${formatDuration(budget.compute_seconds.used)} of ${formatDuration(budget.compute_seconds.limit)} CPU time); no job can start. Submit your best checkpoint with submit_artifact.`,
      );
    }
    if (kind === 'rollouts' && episodes > budget.rollout_episodes.left) {
      throw new A2rlError(
        'BUDGET_EXHAUSTED',
        `Only ${budget.rollout_episodes.left} rollout episodes are left in the budget; ask for at most that many.`,
      );
    }
    // exec stays allowed over the quota: it is how the agent deletes files.
    if (kind !== 'exec' && this.overDiskQuota()) throw this.quotaError(this.diskReading.used, 'no training or rollout job can start');
    // A job being stopped keeps its slot and its memory until its processes are gone: one that ignores TERM runs on
    // through its grace, so freeing them at the stop would let cancel-and-start pile up live jobs.
    const running = this.services.store.listJobs(this.id, agentJobKinds).filter((job) => job.state === 'running');
    const named = (jobs: JobRow[]) =>
      jobs.map((job) => `job-${job.seq}${this.services.jobs.isStopping(job.id) ? ' (being stopped)' : ''}`).join(', ');
    const alike = running.filter((job) => (job.kind === 'exec') === (kind === 'exec'));
    if (kind === 'exec' && alike.length >= maxConcurrentExecs) {
      throw new A2rlError(
        'CONFLICT',
        `This command was not started and nothing was charged: ${alike.length} exec commands of this run are already running (${named(alike)}), at most ${maxConcurrentExecs} at once. Run commands one after another, or start long work with run_training.`,
      );
    }
    if (kind !== 'exec' && alike.length >= maxConcurrentJobs) {
      throw new A2rlError(
        'CONFLICT',
        `${alike.length} training and rollout jobs are already running (${named(alike)}); at most ${maxConcurrentJobs} at once. Nothing was started or charged: wait with job_status or stop one with cancel_job.`,
      );
    }
    const room = this.task.jobs.memoryMb * 2 ** 20 * runJobsRoom;
    const held = running.reduce((sum, job) => sum + (JSON.parse(job.resources) as ResourceLimits).memoryBytes, 0);
    if (held + memoryBytes > room) {
      const mib = (bytes: number) => `${Math.round(bytes / 2 ** 20)} MiB`;
      throw new A2rlError(
        'CONFLICT',
        `This job was not started and nothing was charged: the run's running jobs (${named(running)}) hold ${mib(held)} of memory, and with this one's ${mib(memoryBytes)} they would pass the ${mib(room)} all of a run's jobs may hold together. Wait for one to end (job_status with wait_seconds) or stop one (cancel_job)${kind === 'training' ? ', or ask for less with memory_mb' : ''}.`,
      );
    }
    const { maxJobs, maxExecs } = this.services.limits;
    // Refused rather than queued: the agent sees at once that it must wait, and its budget pays for no waiting.
    // Execs have a server cap of their own beside the long jobs': a server busy with training still lets every run look and clean up.
    if (kind === 'exec' && this.services.jobs.runningOfKinds(['exec']) >= maxExecs) {
      throw new A2rlError(
        'BUSY',
        `This command was not started and nothing was charged: the server is running its limit of ${maxExecs} exec commands across all runs, and none ended within ${execSlotWaitMs / 1000} s. Try again shortly; start long work with run_training.`,
      );
    }
    if (kind !== 'exec' && this.services.jobs.runningOfKinds(longJobKinds) >= maxJobs) {
      throw new A2rlError(
        'BUSY',
        `This job was not started and nothing was charged: the server is running its limit of ${maxJobs} training and rollout jobs across all runs. Wait for a job to finish and try again (job_status shows yours; cancel_job frees one of them); exec still works meanwhile.`,
      );
    }
  }

  /** Whether one of the run's agent jobs is being stopped: the slot and memory it holds come free within its grace. */
  private stoppingJobs(): boolean {
    return this.listJobs().some((job) => job.state === 'running' && this.services.jobs.isStopping(job.id));
  }

  /** Enforces the budget: called every second by the engine; a check still stopping jobs is not overlapped. */
  async enforceBudget(): Promise<void> {
    if (this.enforcing) return;
    this.enforcing = true;
    try {
      await this.checkBudget();
    } finally {
      this.enforcing = false;
    }
  }

  private async checkBudget(): Promise<void> {
    const row = this.services.store.getRun(this.id)!;
    if (row.state === 'ended') {
      // Ended from another process (`a2rl runs revoke`): its jobs here stop too; none are left after an end here.
      await this.services.jobs.stopRun(this.id, 'cancelled', `the run ended: ${row.end_reason}`, agentJobKinds);
      return;
    }
    const budget = this.budget();
    if (budget.wall_seconds.left <= 0) {
      await this.end('wall-clock budget exhausted', 'budget_stopped');
    } else if (await this.enforceDiskQuota()) {
      return;
    } else if (budget.compute_seconds.left <= 0) {
      const running = this.services.store.listJobs(this.id, agentJobKinds).filter((job) => job.state === 'running');
      if (running.length > 0) {
        this.record('budget', 'compute_exhausted', { stopping: running.map((job) => job.id) });
        await this.services.jobs.stopRun(this.id, 'budget_stopped', 'the compute budget was spent', agentJobKinds);
      }
    }
  }

  /**
   * Per-run disk quota, by accounting: the run's disk account is measured every second (less
   * often when a walk is slow); over the quota, training and rollout jobs stop, and so does an exec once the usage grew
   * while it ran (an exec that deletes files is left to finish). Returns whether it stopped anything.
   */
  private async enforceDiskQuota(): Promise<boolean> {
    const { used, walkStartedAt } = Date.now() >= this.nextDiskCheckAt ? await this.measureDisk() : this.diskReading;
    const running = this.services.store.listJobs(this.id, agentJobKinds).filter((job) => job.state === 'running');
    const execGrew = this.execsThatGrew(running, used, walkStartedAt);
    if (!this.overDiskQuota()) return false;
    const stopping = running.filter((job) => job.kind !== 'exec' || execGrew.has(job.id));
    if (stopping.length === 0) return false;
    const reason = this.quotaError(used, 'the job was stopped').message;
    this.record('budget', 'disk_quota_exceeded', {
      used_bytes: used,
      quota_bytes: this.services.limits.diskQuotaBytes,
      stopping: stopping.map((j) => j.id),
    });
    await Promise.all(stopping.map((job) => this.services.jobs.stop(job.id, 'budget_stopped', reason)));
    return true;
  }

  /**
   * The running execs the usage grew under: above the lowest reading of a walk that started after the exec did. A walk
   * from before it (it missed what the exec wrote), or one that only caught up with an earlier job's writes, is no
   * baseline: an exec that deletes files over the quota would be stopped for what it did not write.
   */
  private execsThatGrew(running: readonly JobRow[], used: number, walkStartedAt: number): Set<number> {
    const grew = new Set<number>();
    const execs = running.filter((job) => job.kind === 'exec');
    for (const id of this.execDiskLows.keys()) if (!execs.some((job) => job.id === id)) this.execDiskLows.delete(id);
    for (const job of execs) {
      if (walkStartedAt < job.created_at) continue;
      const low = this.execDiskLows.get(job.id);
      if (low !== undefined && used > low) grew.add(job.id);
      this.execDiskLows.set(job.id, Math.min(low ?? used, used));
    }
    return grew;
  }

  /** Ends the run: agent jobs stop (TERM, then KILL); grading already queued goes on. */
  async end(reason: string, jobState: JobState = 'cancelled'): Promise<void> {
    if (!this.services.store.endRun(this.id, reason, Date.now())) return;
    this.record('run', 'ended', { reason, budget: this.budget() });
    await this.services.jobs.stopRun(this.id, jobState, `the run ended: ${reason}`, agentJobKinds);
    await this.sandbox.destroy();
    await this.search?.close();
  }
}
