import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import { cgroupsUnavailableReason, JobCgroup, sweepCgroups } from '../sandbox/cgroup.js';
import { processStartTime } from '../sandbox/process-tree.js';
import type { SandboxBackend } from '../sandbox/sandbox.js';
import { formatBudget, parseBudget } from './budget.js';
import { renderInstructions } from './instructions.js';
import { A2rlError } from './errors.js';
import { Grader } from './grading.js';
import { JobManager } from './jobs.js';
import { LlmJudge, type LlmJudgeOptions } from './judge/llm.js';
import { RubricJudge } from './judge/rubric.js';
import { createLogger, type Logger } from './logger.js';
import { packageRoot } from './paths.js';
import { eventRecorder } from './recorder.js';
import { Run } from './run.js';
import { Store } from './store.js';
import { startGrading } from './submissions.js';
import { getTask } from './tasks.js';
import { Workspace } from './workspace.js';

export type JudgeConfig = { kind: 'rubric' } | ({ kind: 'llm' } & LlmJudgeOptions);

export interface EngineOptions {
  home: string;
  logger?: Logger;
  gradingConcurrency?: number;
  /** Judge of judge-graded tasks: the task's rubric (default) or an LLM. */
  judge?: JudgeConfig;
}

export interface CreateRunOptions {
  taskId: string;
  /** `wall=30m,compute=20m,...` over the task's default budget. */
  budget?: string;
  label?: string;
}

/** Folders of a workspace the agent writes to. */
const writableDirs = ['code', 'output', 'rollouts'];

/**
 * The server-side core, one per process: store, sandbox backend, jobs, grading, and the
 * runs it serves. Transports and MCP sessions sit on top of it.
 */
export class Engine {
  private readonly runs = new Map<string, Run>();
  private readonly ticker: NodeJS.Timeout;
  private closed = false;
  private ticking = false;

  private constructor(
    readonly home: string,
    readonly store: Store,
    readonly logger: Logger,
    readonly backend: SandboxBackend,
    readonly jobs: JobManager,
    readonly grader: Grader,
    readonly owner: string,
  ) {
    this.ticker = setInterval(() => void this.tick(), 1000);
    this.ticker.unref();
  }

  static async open(options: EngineOptions): Promise<Engine> {
    const logger = options.logger ?? createLogger().logger;
    const owner = `${process.pid}-${processStartTime(process.pid) ?? 0}`;
    const backend = new BubblewrapBackend(owner);
    const unavailable = await backend.unavailableReason();
    if (unavailable) throw new A2rlError('SANDBOX_UNAVAILABLE', `The ${backend.name} sandbox cannot run here: ${unavailable}.`);
    const noCgroups = cgroupsUnavailableReason();
    if (noCgroups) {
      logger.warn(`${noCgroups}: jobs run without memory, CPU and process limits, and compute is charged as wall time × all cores`);
    }
    const store = new Store(join(options.home, 'store.sqlite'));
    const jobs = new JobManager(store, logger, owner);
    const judgeConfig = options.judge ?? { kind: 'rubric' };
    const judge = judgeConfig.kind === 'llm' ? new LlmJudge(store, judgeConfig) : new RubricJudge(backend, join(options.home, 'judging'));
    const grader = new Grader(store, jobs, backend, judge, join(options.home, 'grading'), logger, options.gradingConcurrency ?? 1);
    const engine = new Engine(options.home, store, logger, backend, jobs, grader, owner);
    engine.recover();
    return engine;
  }

  /**
   * After a crash: the jobs and runs of servers that are gone end (jobs as lost), their
   * unfinished gradings are graded here, and their cgroups are swept.
   */
  private recover(): void {
    const now = Date.now();
    for (const job of this.store.listRunningJobs()) {
      if (ownerAlive(job.owner)) continue;
      this.store.finishJob(job.id, {
        state: 'lost',
        reason: 'the server that ran this job stopped before it ended',
        exit_code: null,
        signal: null,
        cpu_s: job.cpu_s,
        gpu_s: job.gpu_s,
        episodes_done: null,
        result: null,
        ended_at: now,
      });
      this.logger.warn({ job: job.id, run: job.run_id }, 'job of a stopped server marked lost');
    }
    for (const run of this.store.listActiveRuns()) {
      if (ownerAlive(run.owner)) continue;
      this.store.endRun(run.id, 'the server stopped before the run ended', now);
      eventRecorder(this.store, run.id, run.created_at)('run', 'ended', { reason: 'the server stopped before the run ended' });
    }
    for (const submission of this.store.listUnfinishedSubmissions()) {
      const run = this.store.getRun(submission.run_id)!;
      if (ownerAlive(run.owner)) continue;
      this.logger.info({ run: run.id, submission: submission.id }, 're-grading a submission left unfinished by a stopped server');
      startGrading(
        this,
        getTask(run.task_id),
        { id: run.id, dir: run.dir, record: eventRecorder(this.store, run.id, run.created_at) },
        submission,
      );
    }
    sweepCgroups(ownerAlive);
  }

  async createRun(options: CreateRunOptions): Promise<Run> {
    const task = getTask(options.taskId);
    const limits = parseBudget(options.budget, task.defaultLimits);
    const createdAt = Date.now();
    const id = `${new Date(createdAt).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)}-${randomBytes(3).toString('hex')}`;
    const dir = join(this.home, 'runs', id);
    // Empty read-only folders that models/ and lib/ show, with mount points for what lies in them.
    const skeleton = join(dir, 'skeleton');
    mkdirSync(join(skeleton, 'models'), { recursive: true });
    mkdirSync(join(skeleton, 'lib'), { recursive: true });
    const workspace = new Workspace(join(dir, 'workspace'), [
      { path: 'instructions.md', source: join(dir, 'instructions.md') },
      { path: 'data', source: task.paths.trainData },
      { path: 'models', source: join(skeleton, 'models') },
      { path: 'models/base', source: task.paths.baseModel },
      { path: 'lib', source: join(skeleton, 'lib') },
      { path: 'lib/microlm', source: task.paths.library },
      { path: `lib/${task.env.package}`, source: task.paths.env },
    ]);
    const instructions = renderInstructions(task, limits, options.label, this.grader.judge.id);
    writeFileSync(join(dir, 'instructions.md'), instructions, { mode: 0o444 });
    workspace.prepare(writableDirs);
    this.store.insertRun({
      id,
      task_id: task.id,
      label: options.label ?? null,
      budget: JSON.stringify(limits),
      dir,
      sandbox: this.backend.name,
      grader_version: this.grader.version(task),
      owner: this.owner,
      created_at: createdAt,
    });
    const sandbox = await this.backend.create({
      name: id,
      mounts: workspace.sandboxMounts(),
      // The store, all runs and the package (graders, evaluation data) stay invisible even where a system path would hold them.
      hidden: [this.home, packageRoot],
      env: { PYTHONPATH: '/workspace/lib', PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1' },
      workdir: '/workspace',
    });
    const record = eventRecorder(this.store, id, createdAt);
    const run = new Run(this, this.store.getRun(id)!, task, limits, workspace, sandbox, instructions, record);
    this.runs.set(id, run);
    record('run', 'created', { task: task.id, label: options.label ?? null, budget: limits, sandbox: this.backend.name });
    this.logger.info({ run: id, task: task.id, budget: formatBudget(limits) }, 'run created');
    void this.gradeBaseline(run).catch(() => undefined);
    return run;
  }

  /** The untouched base model's grade, computed once per (task, model, grader version). */
  gradeBaseline(run: Run) {
    return this.grader.grade({
      task: run.task,
      contentHash: run.task.baseModelHash,
      checkpointDir: run.task.paths.baseModel,
      runId: run.id,
      runDir: run.dir,
      record: run.record,
    });
  }

  private async tick(): Promise<void> {
    // Stopping jobs takes seconds; a tick never overlaps the one before.
    if (this.closed || this.ticking) return;
    this.ticking = true;
    try {
      this.jobs.sample();
      for (const run of this.runs.values()) await run.enforceBudget();
    } catch (error) {
      this.logger.error({ err: error }, 'budget check failed');
    } finally {
      this.ticking = false;
    }
  }

  /** Ends the server's part: agent jobs stop, grading in flight finishes, the store closes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.ticker);
    for (const run of this.runs.values()) await run.end('the server stopped');
    await this.grader.drain();
    await this.jobs.stopAll('the server stopped');
    JobCgroup.removeGroup(this.owner);
    this.store.close();
  }
}

function ownerAlive(owner: string): boolean {
  const [pid, startTime] = owner.split('-').map(Number);
  return pid !== undefined && processStartTime(pid) === startTime;
}
