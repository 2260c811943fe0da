import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { z } from 'zod';
import type { SandboxBackend } from '../sandbox/sandbox.js';
import { A2rlError } from './errors.js';
import { readTail } from './safe-fs.js';
import type { JobManager } from './jobs.js';
import type { Logger } from './logger.js';
import type { RecordEvent } from './recorder.js';
import type { GradeRow, Store } from './store.js';
import type { Task } from './tasks.js';

const graderOutputSchema = z.object({
  public: z.object({ score: z.number().min(0).max(100) }),
  private: z.object({ score: z.number().min(0).max(100) }),
});

/** Fixed layout of the grading sandbox; graders read their inputs from here. */
const gradingRoot = '/opt/a2rl';

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
 * Grades checkpoints with the task's own grader in a sandbox of its own (no network,
 * the checkpoint and the evaluation data read-only, nothing of the agent's workspace).
 * Grades are cached per (task, grader version, content hash): grading is deterministic,
 * so identical content is graded once. Grading time is not charged to any run's compute.
 */
export class Grader {
  private readonly limit: ReturnType<typeof pLimit>;
  private readonly inFlight = new Map<string, Promise<GradeRow>>();

  constructor(
    private readonly store: Store,
    private readonly jobs: JobManager,
    private readonly backend: SandboxBackend,
    private readonly scratchDir: string,
    private readonly logger: Logger,
    concurrency: number,
  ) {
    this.limit = pLimit(concurrency);
  }

  /** Resolves when every grading started so far has finished. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()]);
  }

  cached(task: Task, contentHash: string): GradeRow | undefined {
    return this.store.getGrade(task.id, task.graderVersion, contentHash);
  }

  grade(request: GradeRequest): Promise<GradeRow> {
    const cached = this.cached(request.task, request.contentHash);
    if (cached) return Promise.resolve(cached);
    const key = `${request.task.id}:${request.task.graderVersion}:${request.contentHash}`;
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
    });
    try {
      const argv = [
        '/usr/bin/python3',
        `${gradingRoot}/grader/${task.grader.entry}`,
        '--checkpoint',
        `${gradingRoot}/checkpoint`,
        '--eval-dir',
        `${gradingRoot}/eval`,
        '--out',
        `${gradingRoot}/out/result.json`,
      ];
      const job = this.jobs.start({
        runId: request.runId,
        kind: 'grading',
        command: `grade ${request.contentHash.slice(0, 12)} with ${task.grader.entry}`,
        argv,
        sandbox,
        limits: { cpus: task.grader.cpus, memoryBytes: task.grader.memoryMb * 2 ** 20, pids: 64, gpus: [] },
        charged: false,
        timeoutMs: task.grader.timeoutSeconds * 1000,
        logDir: join(request.runDir, 'logs'),
        record: request.record,
      });
      const done = await this.jobs.wait(job.id, Number.POSITIVE_INFINITY);
      if (done.state !== 'succeeded') {
        throw new A2rlError(
          'GRADING_FAILED',
          `the grader could not score this checkpoint (${done.reason ?? done.state}): ${lastLines(done.log_path, 3)}`,
        );
      }
      const details = readFileSync(join(outDir, 'result.json'), 'utf8');
      const output = graderOutputSchema.safeParse(parseJson(details));
      if (!output.success) throw new A2rlError('GRADING_FAILED', `the grader wrote no valid result: ${output.error.message}`);
      const grade: GradeRow = {
        task_id: task.id,
        grader_version: task.graderVersion,
        content_hash: request.contentHash,
        public_score: output.data.public.score,
        private_score: output.data.private.score,
        details,
        duration_ms: Date.now() - started,
        created_at: Date.now(),
      };
      this.store.insertGrade(grade);
      this.logger.info({ task: task.id, hash: request.contentHash.slice(0, 12), public: grade.public_score }, 'graded');
      return this.store.getGrade(task.id, task.graderVersion, request.contentHash)!;
    } finally {
      await sandbox.destroy();
      rmSync(outDir, { recursive: true, force: true });
    }
  }
}

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
