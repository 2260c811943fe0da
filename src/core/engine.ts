import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { readHostGpuDevices } from '../../sandbox/gpu-devices.js';
import { jobIdentity } from '../../sandbox/job-identity.js';
import { isAncestor } from '../../sandbox/process-tree.js';
import {
  createWorkspaceImage,
  freeWorkspaceImage,
  hasWorkspaceImage,
  imageOvercommitRefusal,
  imageOvercommitWarning,
  kernelStorageUnavailable,
  mountWorkspace,
  type StorageEnforcement,
  unmountStaleWorkspaces,
  unmountWorkspace,
} from '../../sandbox/run-storage.js';
import { type BackendSettings, createBackend, type SandboxName } from '../../sandbox/registry.js';
import { type BudgetLimits, formatBudget, parseBudget } from '../tasks/budget.js';
import { renderInstructions } from './instructions.js';
import { A2rlError } from '../util/errors.js';
import { GpuAllocator } from '../jobs/gpu-allocator.js';
import { type GradeRequest, Grader, gradingStopGraceMs } from '../grading/grader.js';
import { type GraderVersionPart, graderVersionParts } from '../grading/grader-version.js';
import { checkInProgress, IntegrityChecks, stopGraceMs } from '../integrity/background.js';
import { hasFinishedContaminationCheck, recordIncompleteContaminationCheck } from '../integrity/check.js';
import { JobManager } from '../jobs/job-manager.js';
import type { LogCap } from '../jobs/capped-log.js';
import { createJudge, type JudgeConfig, requireJudgeFor } from '../grading/judge/registry.js';
import { createLogger, type Logger } from '../util/logger.js';
import { packageRoot } from '../util/paths.js';
import { RoomToRecord } from '../store/disk-full.js';
import { eventRecorder, type RecordEvent } from '../store/events.js';
import { jobTraceSandbox } from '../jobs/job-trace.js';
import { ownerAlive } from '../../sandbox/process-tree.js';
import { markJobsOfStoppedServersLost, noOwner, ownerOfThisProcess, ownerPid } from './ownership.js';
import { agentJobKinds, maxConcurrentJobs, Run } from './run.js';
import type { RunServices } from './services.js';
import { type RunRow, Store, type SubmissionRow } from '../store/store.js';
import { startGrading } from './submissions.js';
import { resolveFullTask } from '../tasks/full-task.js';
import { getTask, getTaskFile, type Task } from '../tasks/task.js';
import type { SearchSettings } from '../search/provider.js';
import { searchClientLibrary, SearchService } from '../search/service.js';
import { sandboxWorkspace, Workspace } from './workspace.js';

export interface EngineOptions {
  home: string;
  logger?: Logger;
  gradingConcurrency?: number;
  /** Judge of judge-graded tasks: the task's rubric (default) or an LLM. */
  judge?: JudgeConfig;
  /** Most training and rollout jobs of all runs running at once in this process (default: no limit beyond each run's). */
  maxJobs?: number;
  /** Most exec commands of all runs running at once in this process (default: no limit beyond each run's). */
  maxExecs?: number;
  /** Most bytes each run may take on disk: workspace, job logs, snapshots (default: {@link defaultDiskQuotaBytes}). */
  diskQuotaBytes?: number;
  /** What holds each new run to its disk quota: its own filesystem where the host can (default), or the disk walk. */
  storage?: 'kernel' | 'walk';
  /**
   * Make a new run's image even where the home's free space cannot cover its quota and what the live runs' images may
   * still grow (a warning then, no refusal): `serve --overcommit-disk`.
   */
  overcommitDisk?: boolean;
  /** How long closing waits for gradings in flight before it records them unsettled and leaves (default {@link gradingStopGraceMs}). */
  gradingGraceMs?: number;
  /** Tool calls each run may make per second, sustained (default: {@link defaultCallsPerSecond}). */
  callsPerSecond?: number;
  /** What each job's log keeps of its output (default: the first and last 16 MiB). */
  logCap?: LogCap;
  /**
   * Clean up after servers that are gone (default: yes). A short-lived command that only
   * writes to the store (`a2rl runs create`) skips it, so it never waits on others' grading.
   */
  recover?: boolean;
  /** Sandbox backend of every run and grading, by its registry name (default: bwrap). */
  sandbox?: SandboxName;
  /** Settings of the backend named by `sandbox` (Slurm: shared root, partitions). */
  backendSettings?: BackendSettings;
  /** A backend built by the caller instead (tests, embedding); `sandbox` is then ignored. */
  backend?: SandboxBackend;
  /** Host GPU indices jobs may be given (`serve --gpus 0,1`); none by default. */
  gpus?: number[];
  /** The search provider of runs whose budget allows search queries (`serve --search`); none by default. */
  search?: SearchSettings;
}

export interface CreateRunOptions {
  taskId: string;
  /** `wall=30m,compute=20m,...` over the task's default budget. */
  budget?: string;
  label?: string;
  /** A full-tier task's base model, a Hugging Face id (default: the task's defaultModel); micro tasks ship theirs. */
  baseModel?: string;
}

/** Per-run disk quota when the server is given none. */
export const defaultDiskQuotaBytes = 4 * 2 ** 30;

/** Per-run call rate when the server is given none: far above what a real agent makes, far below a loop's. */
export const defaultCallsPerSecond = 20;

/** Folders of a workspace the agent writes to. */
const writableDirs = ['code', 'output', 'rollouts'];

/**
 * The server-side core, one per process: it wires the store, sandbox backend, jobs and
 * grading into the services every run is given, and keeps the runs it serves (creating,
 * adopting, recovering them). Transports and MCP sessions sit on top of it.
 */
export class Engine {
  /** What every run this engine serves is given. */
  readonly services: RunServices;
  private readonly runs = new Map<string, Run>();
  private readonly adopting = new Map<string, Promise<Run>>();
  /** Full-tier tasks resolved (or being resolved) for this process's runs, by task and base model. */
  private readonly fullTasks = new Map<string, Promise<Task>>();
  private readonly ticker: NodeJS.Timeout;
  private closed = false;
  /** Contamination checks of the runs this process saw end (invariant 12), and which runs' checks were started. */
  private readonly integrity: IntegrityChecks;
  private readonly integrityStarted = new Set<string>();
  /** What holds the runs this process serves first to their quota (`EngineOptions.storage`). */
  private storage: 'kernel' | 'walk' = 'kernel';
  private overcommitDisk = false;
  private gradingGraceMs = gradingStopGraceMs;
  /** Run folders whose workspace filesystem this process mounted: unmounted when it closes. */
  private readonly mountedWorkspaces = new Set<string>();

  private constructor(
    readonly home: string,
    readonly store: Store,
    readonly logger: Logger,
    readonly backend: SandboxBackend,
    readonly jobs: JobManager,
    readonly grader: Grader,
    readonly owner: string,
    limits: RunServices['limits'],
    /** Search for runs whose budget allows queries, where the server was given a provider. */
    readonly search?: SearchService,
  ) {
    this.services = { home, store, jobs, grader, logger, limits, room: new RoomToRecord(home, logger) };
    this.integrity = new IntegrityChecks(home, store.path, (runId, unfinished) => {
      logger.error({ run: runId, reason: unfinished.reason }, 'the contamination check did not finish: recorded incomplete');
      try {
        recordIncompleteContaminationCheck(store, runId, unfinished);
      } catch (recordError) {
        logger.error({ err: recordError, run: runId }, 'the failed contamination check could not be recorded');
      }
    });
    this.ticker = setInterval(() => this.tick(), 1000);
    this.ticker.unref();
  }

  static async open(options: EngineOptions): Promise<Engine> {
    const logger = options.logger ?? createLogger().logger;
    const owner = ownerOfThisProcess();
    const backend = options.backend ?? createBackend(options.sandbox ?? 'bwrap', owner, options.backendSettings);
    if (backend.scheduler && (options.gpus?.length ?? 0) > 0) {
      throw new A2rlError(
        'INVALID_INPUT',
        `On the ${backend.name} backend GPUs are the cluster's, scheduled by it; drop --gpus (jobs ask for GPUs and wait in its queue).`,
      );
    }
    const unavailable = await backend.unavailableReason();
    if (unavailable) throw new A2rlError('SANDBOX_UNAVAILABLE', `The ${backend.name} sandbox cannot run here: ${unavailable}.`);
    // Read once, off the server's thread, before any GPU job starts: each one's device nodes come from it.
    if ((options.gpus?.length ?? 0) > 0) await readHostGpuDevices();
    const shortcoming = backend.hostCheck();
    if (shortcoming) logger.warn(shortcoming);
    // Before anything starts: a search setting that cannot work (no key, no corpus) is refused here.
    const search = options.search ? SearchService.create(options.search, options.home) : undefined;
    const store = new Store(join(options.home, 'store.sqlite'));
    store.checkpointInBackground();
    const jobs = new JobManager(store, logger, owner, new GpuAllocator(options.gpus ?? []), options.logCap, backend.scheduler);
    const judge = createJudge(options.judge ?? { kind: 'rubric' }, { store, backend, home: options.home });
    const grader = new Grader(store, jobs, backend, judge, join(options.home, 'grading'), logger, options.gradingConcurrency ?? 1, search);
    const engine = new Engine(
      options.home,
      store,
      logger,
      backend,
      jobs,
      grader,
      owner,
      {
        maxJobs: options.maxJobs ?? Number.POSITIVE_INFINITY,
        maxExecs: options.maxExecs ?? Number.POSITIVE_INFINITY,
        diskQuotaBytes: options.diskQuotaBytes ?? defaultDiskQuotaBytes,
        callsPerSecond: options.callsPerSecond ?? defaultCallsPerSecond,
      },
      search,
    );
    engine.storage = options.storage ?? 'kernel';
    engine.overcommitDisk = options.overcommitDisk ?? false;
    engine.gradingGraceMs = options.gradingGraceMs ?? gradingStopGraceMs;
    if (options.recover ?? true) await engine.recover();
    engine.warnOvercommit();
    return engine;
  }

  /**
   * After a crash: the jobs of servers that are gone end (as lost) and their cgroups are
   * swept. Their runs end and their unfinished gradings are graded here, except active
   * runs served over HTTP (those with a token): they wait for an HTTP server to adopt them.
   */
  private async recover(): Promise<void> {
    const now = Date.now();
    await markJobsOfStoppedServersLost(this.store, this.backend, this.logger);
    // Workspaces a killed server left mounted; whoever serves their runs next mounts them again.
    // A check left running by its stopped server still reads its run's workspace.
    await unmountStaleWorkspaces(this.home, (id) => {
      const run = this.store.getRun(id);
      return run !== undefined && (ownerAlive(run.owner) || checkInProgress(run.dir));
    });
    for (const run of this.store.listActiveRuns()) {
      if (ownerAlive(run.owner) || this.isRemote(run.id)) continue;
      this.store.endRun(run.id, 'the server stopped before the run ended', now);
      eventRecorder(this.store, run.id, run.created_at)('run', 'ended', { reason: 'the server stopped before the run ended' });
    }
    for (const submission of this.store.listUnfinishedSubmissions()) {
      const run = this.store.getRun(submission.run_id)!;
      if (ownerAlive(run.owner) || (run.state === 'active' && this.isRemote(run.id))) continue;
      await this.regrade(run, submission);
    }
  }

  private async regrade(run: RunRow, submission: SubmissionRow): Promise<void> {
    this.logger.info({ run: run.id, submission: submission.id }, 're-grading a submission left unfinished by a stopped server');
    startGrading(
      this.services,
      await this.taskOf(run),
      { id: run.id, dir: run.dir, record: eventRecorder(this.store, run.id, run.created_at) },
      submission,
    );
  }

  /**
   * Checks every ended run no live server holds whose contamination check never recorded a verdict (its server died
   * first, or stopped before it started) or was interrupted (the store failed it): none reads clean unchecked. For
   * `serve --http` as it starts: a stdio server checks its own run only, and never waits for another's.
   */
  checkUncheckedRuns(): void {
    for (const run of this.store.listRuns()) {
      if (run.state !== 'ended' || ownerAlive(run.owner) || this.integrityStarted.has(run.id)) continue;
      if (hasFinishedContaminationCheck(this.store, run.id)) continue;
      this.logger.info({ run: run.id }, 'checking a run whose check did not finish');
      this.integrityStarted.add(run.id);
      this.integrity.start(run.id);
    }
  }

  /** Whether the run is served over HTTP (has a token) rather than to one stdio client. */
  isRemote(runId: string): boolean {
    return this.store.getRunToken(runId) !== undefined;
  }

  /** Creates a run and serves it from this process. */
  async createRun(options: CreateRunOptions): Promise<Run> {
    this.requireSearchFor(options.taskId, parseBudget(options.budget, (await this.taskFor(options)).defaultLimits));
    // Refused before anything is written. Not binding: two creations at once can both pass here; the check made in one
    // step with the image (mountStorage) is, and a run refused there ends below.
    const refusal = this.imageRoomRefusal();
    if (refusal) throw new A2rlError('SANDBOX_UNAVAILABLE', `The run was not created: ${refusal}.`);
    const row = await this.prepareRun(options);
    try {
      return await this.serveRun(row);
    } catch (error) {
      // Not left active (counted among the live runs, adoptable, refused again at every serving): it ends with why.
      const reason = `it could not be served: ${(error as Error).message}`;
      if (this.store.endRun(row.id, reason, Date.now())) eventRecorder(this.store, row.id, row.created_at)('run', 'ended', { reason });
      throw error;
    }
  }

  /**
   * Why a new run's workspace image is refused (`imageOvercommitRefusal`: the home has no room for its quota beside what
   * the live runs' images may still grow), or undefined: also where it gets no image, or the operator allows overcommit.
   */
  private imageRoomRefusal(newRunId?: string): string | undefined {
    if (this.overcommitDisk || this.storage === 'walk' || this.backend.scheduler || kernelStorageUnavailable()) return undefined;
    const liveRuns = this.store.listActiveRuns().filter((run) => run.id !== newRunId);
    return imageOvercommitRefusal(
      this.home,
      liveRuns.map((run) => run.dir),
      this.services.limits.diskQuotaBytes,
    );
  }

  /** Refuses to serve a run whose budget allows search queries, or whose grader searches, when this server has no search provider. */
  private requireSearchFor(taskId: string, limits: BudgetLimits): void {
    if (getTaskFile(taskId).grader.search && !this.search) {
      throw new A2rlError(
        'INVALID_INPUT',
        `${taskId}'s grader searches the web through the server, but this server has no search provider: start it with --search serpapi, duckduckgo or local (docs/operating.md, "Search").`,
      );
    }
    if (limits.searchQueries && !this.search) {
      throw new A2rlError(
        'INVALID_INPUT',
        `A run of ${taskId} may make ${limits.searchQueries} search queries, but this server has no search provider: start it with --search serpapi, duckduckgo or local (docs/operating.md, "Search"), or give the run --budget searches=0.`,
      );
    }
  }

  /**
   * Writes a new run to the store and prepares its folder, owned by this process; nothing
   * serves it yet. A run prepared by a short-lived command is adopted by an HTTP server.
   */
  async prepareRun(options: CreateRunOptions): Promise<RunRow> {
    const task = await this.taskFor(options);
    const limits = parseBudget(options.budget, task.defaultLimits);
    const createdAt = Date.now();
    const id = `${new Date(createdAt).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)}-${randomBytes(3).toString('hex')}`;
    const dir = join(this.home, 'runs', id);
    // The owner's alone: no other host user may reach into a workspace (its jobs' own uids among them, past the sandbox).
    mkdirSync(join(this.home, 'runs'), { recursive: true, mode: 0o700 });
    chmodSync(join(this.home, 'runs'), 0o700);
    // Empty read-only folders that models/ and lib/ show, with mount points for what lies in them.
    mkdirSync(join(dir, 'skeleton', 'models'), { recursive: true });
    mkdirSync(join(dir, 'skeleton', 'lib'), { recursive: true });
    writeFileSync(join(dir, 'instructions.md'), renderInstructions(task, limits, options.label, this.grader.judge.id), { mode: 0o444 });
    workspaceOf(task, id, dir, limits).prepare(writableDirs);
    this.store.insertRun({
      id,
      task_id: task.id,
      base_model: task.tier === 'full' ? task.modelId : null,
      base_model_hash: task.baseModelHash,
      label: options.label ?? null,
      budget: JSON.stringify(limits),
      dir,
      sandbox: this.backend.name,
      grader_version: this.grader.version(task),
      owner: this.owner,
      created_at: createdAt,
    });
    eventRecorder(this.store, id, createdAt)('run', 'created', {
      task: task.id,
      label: options.label ?? null,
      budget: limits,
      sandbox: this.backend.name,
    });
    this.logger.info({ run: id, task: task.id, budget: formatBudget(limits) }, 'run created');
    return this.store.getRun(id)!;
  }

  /**
   * The task a new run gets, checked before anything is written: a full-tier task's runtime and prepared assets are
   * checked, so that a run on missing or changed assets is refused naming the a2rl prepare command.
   */
  async taskFor({ taskId, baseModel }: Pick<CreateRunOptions, 'taskId' | 'baseModel'>): Promise<Task> {
    requireJudgeFor(getTaskFile(taskId), this.grader.judge);
    if (getTaskFile(taskId).tier === 'micro' && baseModel !== undefined) {
      throw new A2rlError('INVALID_INPUT', `${taskId} is a micro-tier task and ships its own base model; drop --base-model.`);
    }
    return this.taskOf({ task_id: taskId, base_model: baseModel ?? null });
  }

  /**
   * The task a run is served with: a micro task as shipped, a full-tier one resolved on the run's base model (its
   * assets verified once per process and model).
   */
  private async taskOf(row: Pick<RunRow, 'task_id' | 'base_model'>): Promise<Task> {
    if (getTaskFile(row.task_id).tier === 'micro') return getTask(row.task_id);
    const key = `${row.task_id}\0${row.base_model ?? ''}`;
    let task = this.fullTasks.get(key);
    if (!task) {
      // Verifying a model's files takes seconds; the server answers its other runs meanwhile, and runs that start
      // together share one verification. A refusal is not kept: the operator may prepare the assets and try again.
      task = resolveFullTask(row.task_id, this.home, row.base_model ?? undefined);
      this.fullTasks.set(key, task);
      task.catch(() => this.fullTasks.get(key) === task && this.fullTasks.delete(key));
    }
    return task;
  }

  /** Serves a run this process owns: its sandbox, budget enforcement, the baseline grade. */
  private async serveRun(row: RunRow): Promise<Run> {
    const task = await this.taskOf(row);
    const limits = JSON.parse(row.budget) as BudgetLimits;
    this.requireSearchFor(row.task_id, limits);
    const workspace = workspaceOf(task, row.id, row.dir, limits);
    const record = eventRecorder(this.store, row.id, row.created_at);
    await this.mountStorage(row, workspace, record);
    // The search channel's socket, bound into the sandbox: the one way out of it, answered by this process.
    const search = limits.searchQueries
      ? await this.search!.open({ id: row.id, dir: row.dir, limit: limits.searchQueries, record }, this.store)
      : undefined;
    const channel = search?.sandboxMount();
    const trace = jobTraceSandbox(sandboxWorkspace);
    const sandbox = await this.backend
      .create({
        name: row.id,
        mounts: [...workspace.sandboxMounts(), ...task.pythonRuntime.mounts, ...trace.mounts, ...(channel ? [channel.mount] : [])],
        // The store, all runs and the package (graders, evaluation data) stay invisible even where a system path would hold them.
        hidden: [this.home, packageRoot],
        env: {
          // The job trace's hook comes after the task's library: what ran decides the report's route (src/jobs/job-trace.ts).
          PYTHONPATH: `/workspace/lib:${trace.pythonPath}`,
          PYTHONDONTWRITEBYTECODE: '1',
          PYTHONUNBUFFERED: '1',
          ...trace.env,
          ...task.pythonRuntime.env,
          ...channel?.env,
        },
        workdir: '/workspace',
        // Where the backend limits the sandbox as a whole: room for every job a run may have at once, and an exec.
        limits: {
          cpus: task.jobs.cpus * (maxConcurrentJobs + 1),
          memoryBytes: task.jobs.memoryMb * 2 ** 20 * (maxConcurrentJobs + 1),
          pids: task.jobs.pids * (maxConcurrentJobs + 1),
        },
      })
      .catch(async (error: unknown) => {
        await search?.close();
        await this.unmountStorage(row.dir);
        throw error;
      });
    const instructions = readFileSync(join(row.dir, 'instructions.md'), 'utf8');
    const run = new Run(this.services, row, task, limits, workspace, sandbox, instructions, record, search);
    this.runs.set(row.id, run);
    void this.gradeBaseline(run).catch(() => undefined);
    return run;
  }

  /**
   * Makes the run's workspace a filesystem of its own where the host can (sandbox/run-storage.ts), so that the kernel
   * holds it to the quota: made and recorded (`run/storage`, with the walk's reason where it cannot be) at the run's
   * first serving, sized by that server's quota, with the workspace's folders made in it; mounted again by every
   * later one. The walk holds a run instead where the host cannot, and as `walkReason` says.
   */
  private async mountStorage(row: RunRow, workspace: Workspace, record: RecordEvent): Promise<void> {
    try {
      if (hasWorkspaceImage(row.dir)) {
        if (this.backend.scheduler) {
          throw new Error(
            `its workspace is a filesystem image this host mounts, which the ${this.backend.name} backend's compute nodes would not see; serve it with the backend it was made with (${row.sandbox})`,
          );
        }
        // Mounted already by a server that served the run before this one claimed it: its mount is this one's now.
        await mountWorkspace(row.dir);
        this.mountedWorkspaces.add(row.dir);
      } else if (!this.store.listEvents(row.id, 'run').some((event) => event.name === 'storage')) {
        const walk = this.walkReason(workspace);
        // Checked in one step with the image's making (no await between, and its sparse file is made before the first):
        // a creation beside it then counts this run's image among the live runs'.
        const refusal = walk ? undefined : this.imageRoomRefusal(row.id);
        if (refusal) throw new Error(refusal);
        const storage: StorageEnforcement = walk
          ? { enforcement: 'walk', reason: walk }
          : await createWorkspaceImage(row.dir, this.services.limits.diskQuotaBytes);
        if (storage.enforcement === 'kernel') {
          this.mountedWorkspaces.add(row.dir);
          // The image is new and empty: the workspace's folders are made again in it, before any job can act there.
          // Never at a later serving, where root would make them among (and through links of) the agent's files.
          try {
            workspace.prepare(writableDirs);
          } catch (error) {
            // An image without its folders is not the run's: the next serving makes it again.
            this.mountedWorkspaces.delete(row.dir);
            await freeWorkspaceImage(row.dir);
            throw error;
          }
        }
        record('run', 'storage', storage);
        if (storage.enforcement === 'kernel') this.warnOvercommit();
      }
    } catch (error) {
      throw new A2rlError('SANDBOX_UNAVAILABLE', `Run ${row.id} cannot be served here: ${(error as Error).message}.`);
    }
  }

  /** Why a run served for the first time gets the disk walk rather than a filesystem of its own, or undefined. */
  private walkReason(workspace: Workspace): string | undefined {
    if (this.storage === 'walk') return 'the server was started with --storage walk';
    // Slurm's jobs run on compute nodes, which see the run's folder, never a mount made on this host.
    if (this.backend.scheduler) return `the ${this.backend.name} backend's jobs run on other hosts, which would not see this host's mount`;
    // A run served before kernel storage has its files in the folder an image would hide.
    if (!workspace.holdsOnlyPrepared(writableDirs)) return 'the workspace predates kernel storage';
    return undefined;
  }

  /** Logs (refuses nothing) where the live runs' images may outgrow the home's free space: docs/operating.md, "Disk". */
  private warnOvercommit(): void {
    const warning = imageOvercommitWarning(
      this.home,
      this.store.listActiveRuns().map((run) => run.dir),
    );
    if (warning) this.logger.warn({ home: this.home }, warning);
  }

  private async unmountStorage(runDir: string): Promise<void> {
    if (!this.mountedWorkspaces.delete(runDir)) return;
    await unmountWorkspace(runDir).catch((error: unknown) =>
      this.logger.error({ err: error, dir: runDir }, 'a workspace could not be unmounted'),
    );
  }

  /**
   * The run this process serves under `id`, adopting it when its server is gone (an HTTP
   * server restarted, or the run was made by `a2rl runs create`): unfinished gradings
   * are graded again here. Refused while another live server serves it.
   */
  async remoteRun(id: string): Promise<Run> {
    const served = this.runs.get(id);
    if (served) return served;
    const adopting = this.adopting.get(id) ?? this.adopt(id).finally(() => this.adopting.delete(id));
    this.adopting.set(id, adopting);
    return adopting;
  }

  private async adopt(id: string): Promise<Run> {
    const row = this.store.getRun(id);
    if (!row) throw new A2rlError('NOT_FOUND', `No run "${id}" in this server's store; create one with a2rl runs create.`);
    await this.checkGraderVersion(row);
    if (row.owner !== this.owner && (ownerAlive(row.owner) || !this.store.claimRun(id, row.owner, this.owner))) {
      throw new A2rlError(
        'CONFLICT',
        `Run ${id} is served by another a2rl process (pid ${ownerPid(row.owner)}); connect to that server, or stop it first.`,
      );
    }
    const run = await this.serveTakenOver(row, 'adopted');
    this.logger.info({ run: id }, 'run adopted');
    return run;
  }

  private async checkGraderVersion(row: RunRow): Promise<void> {
    const version = this.grader.version(await this.taskOf(row));
    if (row.grader_version !== version) {
      throw new A2rlError(
        'CONFLICT',
        `Run ${row.id} is graded by ${row.grader_version}, this server by ${version}: ${graderVersionDifference(row.grader_version, version)}.`,
      );
    }
  }

  /** Serves a run this process has just claimed from `row.owner`; unfinished gradings are graded again here. */
  private async serveTakenOver(row: RunRow, event: string): Promise<Run> {
    await markJobsOfStoppedServersLost(this.store, this.backend, this.logger, row.id);
    let run: Run;
    try {
      run = await this.serveRun(this.store.getRun(row.id)!);
    } catch (error) {
      // Hand the run back, so that a later try (here or in another server) takes it.
      this.store.claimRun(row.id, this.owner, row.owner);
      throw error;
    }
    run.record('run', event, { owner: this.owner });
    for (const submission of this.store.listUnfinishedSubmissions()) {
      if (submission.run_id === row.id) await this.regrade(row, submission);
    }
    return run;
  }

  /**
   * Serves over stdio a run that `a2rl run` prepared for the agent it launched. The
   * launcher holds the run (so no other process ends it meanwhile) until the agent's MCP
   * server, a descendant of the launcher, takes it over here.
   */
  async serveLaunchedRun(id: string): Promise<Run> {
    const row = this.store.getRun(id);
    if (!row) throw new A2rlError('NOT_FOUND', `No run "${id}" in ${this.home}; a2rl run creates runs and starts their agents.`);
    if (this.isRemote(id)) {
      throw new A2rlError('INVALID_INPUT', `Run ${id} is served over HTTP: connect to a2rl serve --http with its token instead.`);
    }
    if (row.state === 'ended') throw new A2rlError('RUN_ENDED', `Run ${id} has ended (${row.end_reason}); a2rl run starts a new one.`);
    await this.checkGraderVersion(row);
    if (ownerAlive(row.owner) && !isAncestor(ownerPid(row.owner))) {
      throw new A2rlError(
        'CONFLICT',
        `Run ${id} is held by another a2rl process (pid ${ownerPid(row.owner)}); only the agent that a2rl run started for it can serve it.`,
      );
    }
    if (!this.store.claimRun(id, row.owner, this.owner)) throw new A2rlError('CONFLICT', `Run ${id} was just taken by another process.`);
    return this.serveTakenOver(row, 'served');
  }

  /**
   * Settles a run whose agent and server are gone (a launched agent exited, or was killed
   * with its server): the run ends, jobs of stopped servers end as lost, and unfinished
   * gradings, the baseline's too, are graded here; `grader.drain()` waits for them.
   */
  async settleAbandonedRun(id: string, reason: string): Promise<void> {
    const row = this.store.getRun(id);
    if (!row) throw new A2rlError('NOT_FOUND', `No run "${id}" in ${this.home}.`);
    if (row.owner !== this.owner && ownerAlive(row.owner)) {
      throw new A2rlError('CONFLICT', `Run ${id} is still served by pid ${ownerPid(row.owner)}; stop that process first.`);
    }
    const record = eventRecorder(this.store, id, row.created_at);
    await markJobsOfStoppedServersLost(this.store, this.backend, this.logger, id);
    // A server killed with its agent left the workspace mounted; the check below mounts it read-only again.
    if (row.owner !== this.owner) await unmountWorkspace(row.dir);
    if (this.store.endRun(id, reason, Date.now())) record('run', 'ended', { reason });
    // Its server (`serve --run`) may have checked it as it ended.
    if (!this.integrityStarted.has(id) && !hasFinishedContaminationCheck(this.store, id)) {
      this.integrityStarted.add(id);
      this.integrity.start(id);
    }
    for (const submission of this.store.listUnfinishedSubmissions()) {
      if (submission.run_id === id) await this.regrade(row, submission);
    }
    void this.gradeBaseline({ id, dir: row.dir, task: await this.taskOf(row), record }).catch(() => undefined);
  }

  /**
   * Leaves a run this process prepared to another: to the HTTP server `to` names (a launcher's own, so that no other
   * server on this home adopts it first), or by default to whichever HTTP server uses its token first.
   */
  releaseRun(id: string, to = noOwner): void {
    this.store.claimRun(id, this.owner, to);
  }

  /** Adopts every active HTTP run whose server is gone, so budgets are enforced even while no agent is connected. */
  async adoptOrphanedRuns(): Promise<void> {
    for (const row of this.store.listActiveRuns()) {
      if (this.runs.has(row.id) || ownerAlive(row.owner) || !this.isRemote(row.id)) continue;
      await this.remoteRun(row.id).catch((error: unknown) => this.logger.warn({ run: row.id, err: error }, 'could not adopt run'));
    }
  }

  /** How many runs this process serves that are still active. */
  activeRunCount(): number {
    return [...this.runs.values()].filter((run) => run.state === 'active').length;
  }

  /** The untouched base model's grade, computed once per (task, model, grader version). */
  gradeBaseline(run: Pick<Run, 'id' | 'dir' | 'task' | 'record'>) {
    return this.grader.grade({
      task: run.task,
      contentHash: run.task.baseModelHash,
      checkpointDir: run.task.paths.baseModel,
      runId: run.id,
      runDir: run.dir,
      record: run.record,
    });
  }

  private tick(): void {
    if (this.closed) return;
    try {
      this.jobs.sample();
    } catch (error) {
      this.logger.error({ err: error }, 'sampling job usage failed');
    }
    // Not awaited: one run stopping its jobs (seconds) must not delay the other runs' checks.
    for (const run of this.runs.values()) {
      run.enforceBudget().catch((error: unknown) => this.logger.error({ err: error, run: run.id }, 'budget check failed'));
    }
    this.checkEndedRuns();
  }

  /** Starts the contamination check of each served run that ended and whose agent jobs all stopped (so its files are final). */
  private checkEndedRuns(): void {
    for (const run of this.runs.values()) {
      if (run.state !== 'ended' || this.integrityStarted.has(run.id)) continue;
      if (this.store.listJobs(run.id, agentJobKinds).some((job) => job.state === 'running')) continue;
      this.integrityStarted.add(run.id);
      // The check was the ended run's last reader of its workspace: its loop device goes back now, not when this server
      // closes (a reader mounts the image read-only again: run-storage.ts, withWorkspaceReadable).
      this.integrity.start(run.id, () => {
        // The file tools refuse before the image goes: a read would see the empty mount point, a write land on the home's disk.
        if (this.mountedWorkspaces.has(run.dir)) run.closeWorkspace();
        void this.unmountStorage(run.dir);
      });
    }
  }

  /**
   * Ends the server's part: agent jobs stop, grading in flight finishes, the store closes.
   * Runs stay as they are: a stdio run was ended by its transport, an HTTP run resumes
   * when a server adopts it again.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.ticker);
    await Promise.all([...this.runs.values()].map((run) => this.jobs.stopRun(run.id, 'cancelled', 'the server stopped', agentJobKinds)));
    this.checkEndedRuns();
    await this.integrity.drain(stopGraceMs);
    // The checks were the workspaces' last readers (grading reads snapshots): unmounted before grading is waited for,
    // so that a client that kills its stdio server soon after leaving (2 s, the MCP SDK's) finds no mount left behind.
    // A check still running reads its run's: that check unmounts it when it is done (src/integrity/check-process.ts).
    const checking = this.integrity.runningRun && this.store.getRun(this.integrity.runningRun)?.dir;
    await Promise.all([...this.mountedWorkspaces].filter((dir) => dir !== checking).map((dir) => this.unmountStorage(dir)));
    this.recordUnsettled(await this.grader.drain(this.gradingGraceMs));
    // Past the grace: a grading queued never starts as the stop below frees its slot, and one the stop cuts off ends
    // unrecorded; both are a later server's. What the cut-off ones still do settles before the store closes.
    this.grader.stop();
    await this.jobs.stopAll('the server stopped');
    await this.grader.drain(stoppedGradingSettleMs);
    // A run's sandbox (Docker: its container) goes with the server; an adopting server makes a new one.
    await Promise.all([...this.runs.values()].map((run) => run.sandbox.destroy()));
    await Promise.all([...this.runs.values()].map((run) => run.search?.close()));
    this.search?.close();
    await this.backend.dispose();
    this.store.close();
  }

  /**
   * Gradings a stopping server waited for past its grace: recorded on their runs (`grading/unsettled`) and left; the jobs
   * stopped next end them. A later server grades an unfinished submission again; a baseline is graded by the next run
   * that needs it.
   */
  private recordUnsettled(unsettled: GradeRequest[]): void {
    for (const request of unsettled) {
      const what = request.checkpointDir === request.task.paths.baseModel ? 'baseline' : 'submission';
      this.logger.warn(
        { run: request.runId, what },
        `a grading did not settle within ${this.gradingGraceMs / 1000} s of the server stopping: left unsettled`,
      );
      try {
        request.record('grading', 'unsettled', { what, content_hash: request.contentHash, waited_ms: this.gradingGraceMs });
      } catch (error) {
        this.logger.error({ err: error, run: request.runId }, 'an unsettled grading could not be recorded');
      }
    }
  }
}

/** What each part of a grader version (src/grading/grader-version.ts) is, and how to serve a run graded with another. */
const graderVersionPartNotes: Record<GraderVersionPart, { what: string; fix: string }> = {
  grader: { what: "the task's grader", fix: 'the a2rl version it was created with' },
  runner: { what: "the server's program runner", fix: 'the a2rl version it was created with' },
  search: { what: 'the search provider', fix: 'the --search it was created with' },
  env: { what: 'the environment packages (stand-in or upstream)', fix: 'the environment packages it was created with (a2rl prepare)' },
  judge: { what: 'the judge', fix: 'the --judge it was created with' },
};

/** What differs between a run's grader version and this server's, each part named with how to serve the run. */
function graderVersionDifference(run: string, here: string): string {
  const [ours, theirs] = [graderVersionParts(here), graderVersionParts(run)];
  const differing = [...new Set([...theirs.keys(), ...ours.keys()])].filter((key) => theirs.get(key) !== ours.get(key));
  return differing
    .map((key) => {
      const known = graderVersionPartNotes[key];
      return `${known.what} differs (${theirs.get(key) ?? 'none'} for the run, ${ours.get(key) ?? 'none'} here): serve it with ${known.fix}`;
    })
    .join('; ');
}

/** How long a stopping server waits for the gradings its stop cut off to settle (they record nothing: `Grader.stop`). */
const stoppedGradingSettleMs = 2000;

/** What the workspace shows: the run's own folders, and the task's data, model and libraries read-only. */
function workspaceOf(task: Task, runId: string, dir: string, limits: BudgetLimits): Workspace {
  const skeleton = join(dir, 'skeleton');
  const mounts = [
    { path: 'instructions.md', source: join(dir, 'instructions.md') },
    { path: 'data', source: task.paths.trainData },
    { path: 'models', source: join(skeleton, 'models') },
    { path: 'models/base', source: task.paths.baseModel },
    { path: 'lib', source: join(skeleton, 'lib') },
    ...[...task.libraries, ...(limits.searchQueries ? [searchClientLibrary] : [])].map((library) => ({
      path: `lib/${library.name}`,
      source: library.source,
    })),
  ];
  // The run's sandbox is named after its id: the same identity its jobs run as.
  return new Workspace(join(dir, 'workspace'), mounts, jobIdentity(runId));
}
