import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import pLimit from 'p-limit';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import type { JobManager } from '../jobs/job-manager.js';
import type { Judge } from './judge/judge.js';
import { graderKind } from './kinds/index.js';
import { environmentRecord } from './environment.js';
import type { Logger } from '../util/logger.js';
import type { RecordEvent } from '../store/events.js';
import { readTail } from '../util/safe-fs.js';
import type { GradeRow, Store } from '../store/store.js';
import { threadPoolEnv } from '../tasks/full-task.js';
import { libraryMounts, type Task, type Tier } from '../tasks/task.js';
import type { SearchChannel } from '../search/channel.js';
import { searchClientLibrary, type SearchService } from '../search/service.js';

/** Fixed layout of the grading sandbox; graders read their inputs from here. */
const gradingRoot = '/opt/a2rl';

/**
 * Processes and threads a grading may hold at once (each thread counts). A micro grader is one Python process; a
 * full-tier grader runs an inference engine: vLLM's engine and worker processes, each with CUDA, NCCL, tokenizer
 * and compile threads. A grading runs model weights, never model-written code (that runs in sandboxes of its own,
 * `execution.ts`), so the higher limit bounds a runaway engine rather than a fork bomb.
 */
export const gradingPids: Readonly<Record<Tier, number>> = { micro: 64, full: 4096 };

/**
 * A grading sandbox's variables. A full-tier grader's thread pools are sized to its CPUs (`threadPoolEnv`), and it
 * is told when it must decode on a GPU (`gpuDemandEnv`). It then fails, saying why (a CPU build of torch, no device
 * nodes, a vLLM that does not load, out of GPU memory), rather than decode on CPU, where a full grading cannot finish.
 */
export function gradingEnvironment(task: Task, gradingGpus: number, serverEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const base = { PYTHONPATH: `${gradingRoot}/lib`, PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1', ...task.pythonRuntime.env };
  if (task.tier !== 'full') return base;
  return { ...base, ...threadPoolEnv(task.grader.cpus), ...gpuDemandEnv(task, gradingGpus, serverEnv) };
}

/**
 * The variable that makes a full-tier process (a grading, a rollout batch) decode on a GPU or fail saying why
 * (hflm.gpu: A2RL_REQUIRE_GPU=1): when it holds GPUs, or when the operator forced the GPU runtime (A2RL_FULL_GPU=1
 * in the server's environment). Never for micro tasks, which are CPU-only by design.
 */
export function gpuDemandEnv(task: Task, gpus: number, serverEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return task.tier === 'full' && (gpus > 0 || serverEnv.A2RL_FULL_GPU === '1') ? { A2RL_REQUIRE_GPU: '1' } : {};
}

/** Where grading some content stands (`Grader.status`). */
export type GradingStatus = { state: 'graded'; grade: GradeRow } | { state: 'grading' | 'unstarted' } | { state: 'failed'; error: string };

export interface GradeRequest {
  task: Task;
  contentHash: string;
  /** Host folder holding the checkpoint (a submission snapshot, or the task's base model). */
  checkpointDir: string;
  runId: string;
  runDir: string;
  record: RecordEvent;
  /** Called when this grading leaves the queue and starts. */
  onStart?: () => void;
}

/**
 * How long a stopping server waits for the gradings in flight (a stdio run's baseline at its end among them) before it
 * records them unsettled and leaves: bounded, as the contamination check's wait is (src/integrity/background.ts).
 */
export const gradingStopGraceMs = 5 * 60_000;

/**
 * Grades checkpoints with the task's own grader in a sandbox of its own (no network, the
 * checkpoint and the evaluation data read-only, nothing of the agent's workspace), then,
 * by the task's kind, runs the programs it wrote or has its responses judged. Grades are
 * cached per (task, grader version, content hash), the judge being part of the version:
 * grading is deterministic, so identical content is graded once. Grading time is not
 * charged to any run's compute.
 */
export class Grader {
  private readonly limit: ReturnType<typeof pLimit>;
  private readonly inFlight = new Map<string, Promise<GradeRow>>();
  /** The request that started each grading in flight, by the same key. */
  private readonly requests = new Map<string, GradeRequest>();
  /** Why the last grading of a key failed, until it is graded again: a failed baseline is shown with its reason. */
  private readonly failures = new Map<string, string>();
  /** Set by {@link stop}: the server stopped waiting for its gradings. */
  private stopping = false;

  constructor(
    private readonly store: Store,
    private readonly jobs: JobManager,
    private readonly backend: SandboxBackend,
    readonly judge: Judge,
    private readonly scratchDir: string,
    private readonly logger: Logger,
    concurrency: number,
    /** The server's search, for graders that search (task.json `grader.search`). */
    private readonly search?: SearchService,
  ) {
    this.limit = pLimit(concurrency);
  }

  /**
   * The version grades of this task are stored under: the grader's, the server's part of it, the search provider's for
   * graders that search (other answers, other scores), the environment packages it played in (stand-in or upstream,
   * `environmentRecord`), and the judge's for judged tasks.
   */
  version(task: Task): string {
    const kind = graderKind(task.grader.kind);
    // Micro tasks run their programs with their own env package's runner, which their grader version already hashes.
    const server = task.tier === 'full' && kind.serverPart ? `/${kind.serverPart}` : '';
    const search = task.grader.search && this.search ? `/${this.search.gradingVersion}` : '';
    const environment = environmentRecord(task);
    return `${task.graderVersion}${server}${search}${environment ? `/env:${environment}` : ''}${kind.judged ? `/judge:${this.judge.id}` : ''}`;
  }

  /**
   * Resolves when every grading started so far has finished, or once `graceMs` has passed: then with the gradings left
   * unsettled (the first request of each), which a server that stops records and leaves (a later server grades a
   * submission again; a baseline is graded again by the next run that needs it).
   */
  async drain(graceMs = Number.POSITIVE_INFINITY): Promise<GradeRequest[]> {
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      if (Number.isFinite(graceMs)) timer = setTimeout(resolve, graceMs);
    });
    const settled = (async () => {
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()]);
    })();
    try {
      await Promise.race([settled, graceOver]);
    } finally {
      clearTimeout(timer);
    }
    return [...this.requests.values()];
  }

  /**
   * Stops grading, for a server past its grading grace: a grading still queued never starts (its job would start as the
   * server's stop frees slots, and record into a closing store), and one the stop cuts off ends unrecorded
   * ({@link stopped}): both are left to a later server, as unsettled ones are.
   */
  stop(): void {
    this.stopping = true;
  }

  /** Whether the server stopped grading ({@link stop}): a grading that ends now is not its verdict, and is not recorded. */
  get stopped(): boolean {
    return this.stopping;
  }

  cached(task: Task, contentHash: string, version = this.version(task)): GradeRow | undefined {
    return this.store.getGrade(task.id, version, contentHash);
  }

  grade(request: GradeRequest): Promise<GradeRow> {
    const cached = this.cached(request.task, request.contentHash);
    if (cached) return Promise.resolve(cached);
    const key = this.key(request.task, request.contentHash);
    let grading = this.inFlight.get(key);
    if (!grading) {
      this.failures.delete(key);
      grading = this.limit(() => this.run(request))
        .catch((error: unknown) => {
          this.failures.set(key, isA2rlError(error) ? error.message : `grading failed: ${String(error)}`);
          throw error;
        })
        .finally(() => {
          this.inFlight.delete(key);
          this.requests.delete(key);
        });
      this.inFlight.set(key, grading);
      this.requests.set(key, request);
    }
    return grading;
  }

  /** Where grading some content of a task stands: graded, in flight (or queued), failed with the reason, or never started here. */
  status(task: Task, contentHash: string): GradingStatus {
    const grade = this.cached(task, contentHash);
    if (grade) return { state: 'graded', grade };
    const key = this.key(task, contentHash);
    if (this.inFlight.has(key)) return { state: 'grading' };
    const error = this.failures.get(key);
    return error === undefined ? { state: 'unstarted' } : { state: 'failed', error };
  }

  private key(task: Task, contentHash: string): string {
    return `${task.id}:${this.version(task)}:${contentHash}`;
  }

  private async run(request: GradeRequest): Promise<GradeRow> {
    const { task } = request;
    if (this.stopping) throw new A2rlError('UNAVAILABLE', 'The server stopped before this grading started; a later server grades it.');
    const cached = this.cached(task, request.contentHash);
    if (cached) return cached;
    request.onStart?.();
    const outDir = join(this.scratchDir, `${request.contentHash.slice(0, 16)}-${Date.now()}`);
    mkdirSync(outDir, { recursive: true });
    const started = Date.now();
    try {
      const kind = graderKind(task.grader.kind);
      const outFile = await this.runGrader(request, kind.outputFile, outDir);
      const metrics = await kind.score({ task, outFile, outDir, backend: this.backend, judge: this.judge });
      const grade: GradeRow = {
        task_id: task.id,
        grader_version: this.version(task),
        content_hash: request.contentHash,
        public_score: metrics.public.score,
        private_score: metrics.private.score,
        details: JSON.stringify(metrics),
        duration_ms: Date.now() - started,
        created_at: Date.now(),
      };
      this.store.insertGrade(grade);
      this.logger.info({ task: task.id, hash: request.contentHash.slice(0, 12), public: grade.public_score }, 'graded');
      return this.cached(task, request.contentHash)!;
    } finally {
      rmSync(outDir, { recursive: true, force: true });
    }
  }

  /** Phase one: the task's grader decodes the checkpoint on the evaluation set, as a recorded job. */
  private async runGrader(request: GradeRequest, outName: string, outDir: string): Promise<string> {
    const { task } = request;
    // A full-tier grader decodes with vLLM where it sees a GPU; a micro grader is CPU-only by design.
    const gpuCount = task.tier === 'full' ? this.jobs.gradingGpus() : 0;
    const limits = { cpus: task.grader.cpus, memoryBytes: task.grader.memoryMb * 2 ** 20, pids: gradingPids[task.tier] };
    const search = await this.openSearch(request, `${outDir}-search`);
    const sandbox = await this.backend
      .create({
        name: `grading-${request.contentHash.slice(0, 12)}`,
        mounts: [
          { source: request.checkpointDir, target: `${gradingRoot}/checkpoint`, readOnly: true },
          { source: task.paths.evalData, target: `${gradingRoot}/eval`, readOnly: true },
          { source: task.paths.grader, target: `${gradingRoot}/grader`, readOnly: true },
          ...libraryMounts(task, gradingRoot),
          ...task.pythonRuntime.mounts,
          ...task.gradingInputs.mounts,
          { source: outDir, target: `${gradingRoot}/out`, readOnly: false },
          ...(search ? [search.sandboxMount().mount, searchLibraryMount] : []),
        ],
        hidden: [],
        env: { ...gradingEnvironment(task, gpuCount), ...search?.sandboxMount().env },
        workdir: `${gradingRoot}/out`,
        limits,
        grading: true,
      })
      .catch(async (error: unknown) => {
        await closeSearch(search);
        throw error;
      });
    try {
      const job = this.jobs.start({
        runId: request.runId,
        kind: 'grading',
        command: `grade ${request.contentHash.slice(0, 12)} with ${task.grader.entry}`,
        argv: [
          task.pythonRuntime.python,
          `${gradingRoot}/grader/${task.grader.entry}`,
          '--checkpoint',
          `${gradingRoot}/checkpoint`,
          '--eval-dir',
          `${gradingRoot}/eval`,
          '--out',
          `${gradingRoot}/out/${outName}`,
          ...task.gradingInputs.args,
        ],
        sandbox,
        limits: { ...limits, gpus: [] },
        charged: false,
        gpuCount: gpuCount || undefined,
        timeoutMs: task.grader.timeoutSeconds * 1000,
        logDir: join(request.runDir, 'logs'),
        record: request.record,
      });
      const done = await this.jobs.wait(job.id, Number.POSITIVE_INFINITY);
      const outFile = join(outDir, outName);
      if (done.state !== 'succeeded' || !existsSync(outFile)) {
        const why = done.state === 'failed' ? `exit code ${done.exit_code}` : (done.reason ?? done.state);
        throw new A2rlError('GRADING_FAILED', `the grader could not score this checkpoint (${why}): ${lastLines(done.log_path, 3)}`);
      }
      return outFile;
    } finally {
      await sandbox.destroy();
      await closeSearch(search);
    }
  }

  /**
   * A grading's own search channel, where its grader searches: the grading sandbox has no network, like every other,
   * and its only way out is this socket, answered by the server's provider and cache. The key stays in the server.
   */
  private async openSearch(request: GradeRequest, dir: string): Promise<SearchChannel | undefined> {
    if (!request.task.grader.search) return undefined;
    if (!this.search) {
      throw new A2rlError(
        'GRADING_FAILED',
        `${request.task.id}'s grader searches the web, but this server has no search provider: start it with --search serpapi, duckduckgo or local (docs/operating.md, "Search").`,
      );
    }
    return this.search.openForGrading({ dir, record: request.record });
  }
}

/** The search client, where a grader imports it (`from a2rl_search import search`). */
const searchLibraryMount = { source: searchClientLibrary.source, target: `${gradingRoot}/lib/${searchClientLibrary.name}`, readOnly: true };

async function closeSearch(channel: SearchChannel | undefined): Promise<void> {
  if (!channel) return;
  await channel.close();
  rmSync(dirname(dirname(channel.socketPath)), { recursive: true, force: true });
}

function lastLines(path: string, count: number): string {
  return readTail(path, 4096).text.trim().split('\n').slice(-count).join(' | ') || '(no grader output)';
}
