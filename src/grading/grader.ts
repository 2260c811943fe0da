import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { z } from 'zod';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';
import { executePrograms, executionItemSchema } from './execution.js';
import type { JobManager } from '../jobs/job-manager.js';
import { judgeAgainstReferences, type Judge } from './judge/judge.js';
import { lengthControlledWinRate, winRate } from './judge/win-rate.js';
import type { Logger } from '../util/logger.js';
import type { RecordEvent } from '../store/events.js';
import { readTail } from '../util/safe-fs.js';
import type { GradeRow, Store } from '../store/store.js';
import type { Task } from '../tasks/task.js';

const splits = ['public', 'private'] as const;
type Split = (typeof splits)[number];

const scoredOutputSchema = z.object({
  public: z.object({ score: z.number().min(0).max(100) }).passthrough(),
  private: z.object({ score: z.number().min(0).max(100) }).passthrough(),
});

const judgedItemSchema = z.object({
  id: z.string(),
  split: z.enum(splits),
  instruction: z.string(),
  constraints: z.unknown(),
  reference: z.string(),
  response: z.string(),
});

/** Fixed layout of the grading sandbox; graders read their inputs from here. */
const gradingRoot = '/opt/a2rl';
/** Most bytes of a grader's output the server reads. */
const maxGraderOutputBytes = 64 * 2 ** 20;

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

/** Per-split metrics of one grade; `score` is the 0–100 number the agent sees. */
type Metrics = Record<Split, Record<string, number | string> & { score: number }>;

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

  constructor(
    private readonly store: Store,
    private readonly jobs: JobManager,
    private readonly backend: SandboxBackend,
    readonly judge: Judge,
    private readonly scratchDir: string,
    private readonly logger: Logger,
    concurrency: number,
  ) {
    this.limit = pLimit(concurrency);
  }

  /** The version grades of this task are stored under: the grader's, and the judge's for judged tasks. */
  version(task: Task): string {
    return task.grader.kind === 'judge' ? `${task.graderVersion}/judge:${this.judge.id}` : task.graderVersion;
  }

  /** Resolves when every grading started so far has finished. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()]);
  }

  cached(task: Task, contentHash: string, version = this.version(task)): GradeRow | undefined {
    return this.store.getGrade(task.id, version, contentHash);
  }

  grade(request: GradeRequest): Promise<GradeRow> {
    const cached = this.cached(request.task, request.contentHash);
    if (cached) return Promise.resolve(cached);
    const key = `${request.task.id}:${this.version(request.task)}:${request.contentHash}`;
    let grading = this.inFlight.get(key);
    if (!grading) {
      grading = this.limit(() => this.run(request)).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, grading);
    }
    return grading;
  }

  private async run(request: GradeRequest): Promise<GradeRow> {
    const { task } = request;
    const cached = this.cached(task, request.contentHash);
    if (cached) return cached;
    request.onStart?.();
    const outDir = join(this.scratchDir, `${request.contentHash.slice(0, 16)}-${Date.now()}`);
    mkdirSync(outDir, { recursive: true });
    const started = Date.now();
    try {
      const outFile = await this.runGrader(request, outDir);
      const metrics =
        task.grader.kind === 'score'
          ? this.readScores(outFile)
          : task.grader.kind === 'execute'
            ? await this.scorePrograms(task, outFile, outDir)
            : await this.judgeResponses(task, outFile);
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
  private async runGrader(request: GradeRequest, outDir: string): Promise<string> {
    const { task } = request;
    const outName = task.grader.kind === 'score' ? 'result.json' : 'items.jsonl';
    const sandbox = await this.backend.create({
      name: `grading-${request.contentHash.slice(0, 12)}`,
      mounts: [
        { source: request.checkpointDir, target: `${gradingRoot}/checkpoint`, readOnly: true },
        { source: task.paths.evalData, target: `${gradingRoot}/eval`, readOnly: true },
        { source: task.paths.grader, target: `${gradingRoot}/grader`, readOnly: true },
        { source: task.paths.library, target: `${gradingRoot}/lib/microlm`, readOnly: true },
        { source: task.paths.env, target: `${gradingRoot}/lib/${task.env.package}`, readOnly: true },
        { source: outDir, target: `${gradingRoot}/out`, readOnly: false },
      ],
      hidden: [],
      env: { PYTHONPATH: `${gradingRoot}/lib`, PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1' },
      workdir: `${gradingRoot}/out`,
      limits: { cpus: task.grader.cpus, memoryBytes: task.grader.memoryMb * 2 ** 20, pids: 64 },
    });
    try {
      const job = this.jobs.start({
        runId: request.runId,
        kind: 'grading',
        command: `grade ${request.contentHash.slice(0, 12)} with ${task.grader.entry}`,
        argv: [
          '/usr/bin/python3',
          `${gradingRoot}/grader/${task.grader.entry}`,
          '--checkpoint',
          `${gradingRoot}/checkpoint`,
          '--eval-dir',
          `${gradingRoot}/eval`,
          '--out',
          `${gradingRoot}/out/${outName}`,
        ],
        sandbox,
        limits: { cpus: task.grader.cpus, memoryBytes: task.grader.memoryMb * 2 ** 20, pids: 64, gpus: [] },
        charged: false,
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
    }
  }

  private readScores(outFile: string): Metrics {
    const output = scoredOutputSchema.safeParse(parseJson(readFileSync(outFile, 'utf8')));
    if (!output.success) throw new A2rlError('GRADING_FAILED', `the grader wrote no valid result: ${output.error.message}`);
    return output.data as Metrics;
  }

  /** Phase two for code tasks: every program against its hidden tests; pass@1 per split. */
  private async scorePrograms(task: Task, outFile: string, outDir: string): Promise<Metrics> {
    const items = readItems(outFile, executionItemSchema);
    const results = await executePrograms(this.backend, task, items, join(outDir, 'programs'));
    const metrics = (split: Split) => {
      const mine = results.filter((r) => r.split === split);
      const solved = mine.filter((r) => r.total > 0 && r.passed === r.total).length;
      const testsPassed = mine.reduce((sum, r) => sum + r.passed, 0);
      const tests = mine.reduce((sum, r) => sum + r.total, 0);
      return {
        score: round(mine.length ? (100 * solved) / mine.length : 0),
        solved,
        problems: mine.length,
        tests_passed: testsPassed,
        tests,
      };
    };
    return { public: metrics('public'), private: metrics('private') };
  }

  /** Phase two for judged tasks: each response against its reference, both orders; win rate and LC win rate per split. */
  private async judgeResponses(task: Task, outFile: string): Promise<Metrics> {
    const items = readItems(outFile, judgedItemSchema);
    const outcomes = await judgeAgainstReferences(
      this.judge,
      task,
      items.map((item) => ({
        id: item.id,
        instruction: item.instruction,
        constraints: item.constraints,
        candidate: item.response,
        reference: item.reference,
      })),
    );
    const metrics = (split: Split) => {
      const indices = items.map((item, i) => (item.split === split ? i : -1)).filter((i) => i >= 0);
      const mine = indices.map((i) => outcomes[i]!);
      const lc = lengthControlledWinRate(
        mine,
        indices.map((i) => items[i]!.response.length),
        indices.map((i) => items[i]!.reference.length),
      );
      return {
        score: round(winRate(mine)),
        win_rate: round(winRate(mine)),
        lc_win_rate: round(lc),
        comparisons: mine.length,
        mean_length: round(indices.reduce((sum, i) => sum + items[i]!.response.length, 0) / Math.max(1, indices.length)),
        judge: this.judge.id,
      };
    };
    return { public: metrics('public'), private: metrics('private') };
  }
}

function readItems<T extends z.ZodType>(file: string, schema: T): z.infer<T>[] {
  const text = readTail(file, maxGraderOutputBytes);
  if (text.truncated) throw new A2rlError('GRADING_FAILED', `the grader wrote more than ${maxGraderOutputBytes} bytes`);
  return text.text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      const parsed = schema.safeParse(parseJson(line));
      if (!parsed.success)
        throw new A2rlError('GRADING_FAILED', `the grader wrote an invalid line ${i + 1}: ${parsed.error.message.slice(0, 200)}`);
      return parsed.data;
    });
}

const round = (x: number) => Math.round(x * 100) / 100;

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function lastLines(path: string, count: number): string {
  return readTail(path, 4096).text.trim().split('\n').slice(-count).join(' | ') || '(no grader output)';
}
