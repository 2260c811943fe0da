import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { A2rlError, isA2rlError } from '../util/errors.js';
import { sha256 } from '../util/hashing.js';
import type { Run } from './run.js';
import type { JobRow } from '../store/store.js';
import type { JobCost } from '../jobs/job-manager.js';
import { gpuDemandEnv } from '../grading/grader.js';
import { judgeAgainstReferences } from '../grading/judge/judge.js';
import type { SafeDir } from '../util/safe-fs.js';
import { type ResolvedPath, sandboxWorkspace, type Workspace } from './workspace.js';

export interface RolloutRequest {
  checkpoint: string;
  episodes: number;
  groupSize: number;
  temperature: number;
  /** Defaults to the batch number, so repeated calls sample different prompts. */
  seed?: number;
  /** Torch threads of the sampler; at most the job's CPUs. */
  threads: number;
  /**
   * GPUs of the job, checked by Run.checkGpuRequest. Omitted: one for a full-tier task where the server has GPUs
   * (its sampler decodes a Hugging Face model, which on CPU would not finish), else none.
   */
  gpus?: number;
}

export interface RolloutSummary {
  episodes: number;
  /** Mean reward of a completion (static tasks) or mean return of an episode (interactive tasks). */
  mean_reward: number | null;
  /** Share of episodes that reached their goal, where the task's episodes say so (interactive tasks). */
  success_rate?: number;
  /** What the batch cost: episodes per second of the job's run, and CPU-seconds (charged to compute) per episode. */
  episodes_per_second: number | null;
  cpu_seconds_per_episode: number | null;
  out: string;
  /** The server's own copy of the episodes it read, out of the agent's reach: `trajectories/<sha256>.jsonl` in the server's home. */
  trajectories: { sha256: string; bytes: number } | null;
  /** Why the batch file could not be read back (replaced by a link, a folder, a pipe): every requested episode is then charged. */
  unreadable?: string;
}

/** Where the server keeps the episodes of every batch, content-addressed, so that the record survives the agent editing rollouts/. */
export function trajectoriesDir(home: string): string {
  return join(home, 'trajectories');
}

/**
 * Starts the task's rollout sampler in the run's sandbox: episodes with a checkpoint as
 * policy — one completion each for a static task, a multi-step trajectory in the task's
 * environment for an interactive one — scored by the task's reward (by the sampler, or by
 * the judge once it is done), written as JSONL under rollouts/. Episodes are reserved when the job starts and charged
 * as produced when it ends.
 */
export async function launchRollouts(run: Run, request: RolloutRequest): Promise<{ job: JobRow; out: string }> {
  const { task } = run;
  if (request.episodes % request.groupSize !== 0) {
    throw new A2rlError(
      'INVALID_INPUT',
      `episodes (${request.episodes}) must be a multiple of group_size (${request.groupSize}), e.g. ${request.groupSize * Math.max(1, Math.round(request.episodes / request.groupSize))}.`,
    );
  }
  const cpus = Math.max(1, Math.floor(run.jobLimits().cpus));
  if (request.threads > cpus) {
    throw new A2rlError('INVALID_INPUT', `threads (${request.threads}) is more than a job's ${cpus} CPU(s); use 1 to ${cpus}.`);
  }
  const gpus = rolloutGpus(run, request.gpus);
  const checkpoint = run.workspace.resolve(request.checkpoint, 'read');
  if (!isCheckpointFolder(run.workspace, checkpoint, task.checkpoint.required)) {
    throw new A2rlError(
      'INVALID_INPUT',
      `${checkpoint.path} is not a checkpoint folder (it holds ${task.checkpoint.holds}). Use models/base or a folder your training saved.`,
    );
  }
  const batch = run.listJobs(['rollouts']).length + 1;
  const out = `rollouts/batch-${String(batch).padStart(3, '0')}.jsonl`;
  const options: Record<string, string | number> = {
    checkpoint: `${sandboxWorkspace}/${checkpoint.path}`,
    data: `${sandboxWorkspace}/${task.rollouts.data}`,
    n: request.episodes,
    'group-size': request.groupSize,
    temperature: request.temperature,
    seed: request.seed ?? batch,
    threads: request.threads,
    out: `${sandboxWorkspace}/${out}`,
  };
  const argv = [task.pythonRuntime.python, ...task.rolloutSampler, ...Object.entries(options).flatMap(([k, v]) => [`--${k}`, String(v)])];
  const job = await run.startJob('rollouts', {
    command: argv.slice(1).join(' '),
    argv,
    // As many CPUs as sampler threads: the sandbox sizes the BLAS and OpenMP pools to a job's CPUs, and pools wider
    // than torch's threads would spin, charged to the run as compute the agent did not ask for.
    limits: run.jobLimits({ cpus: request.threads }),
    gpuCount: gpus,
    // Given GPUs (or with the GPU runtime forced), the sampler decodes on them or fails the batch saying why: never on CPU.
    env: gpuDemandEnv(task, gpus),
    episodesRequested: request.episodes,
    collect: async (state, cost) => {
      const summary = await collectBatch(run, out, request.episodes, cost);
      run.record('rollouts', 'batch', { job_id: job.id, ...summary, checkpoint: checkpoint.path });
      // A batch whose sampler finished produced every episode asked for, whatever the file holds when it is read back
      // (the agent's own jobs can move, empty or replace it first); an unfinished one is charged what it wrote.
      return {
        episodesDone: state === 'succeeded' || summary.unreadable !== undefined ? request.episodes : summary.episodes,
        result: summary,
      };
    },
  });
  return { job, out };
}

/**
 * A rollout batch's GPUs: as asked (within what one job can get), by default one for a full-tier task on a server
 * with GPUs. There a full-tier batch must hold one: the same rule as its grading, no decoding of a Hugging Face model
 * on CPU.
 */
function rolloutGpus(run: Run, asked: number | undefined): number {
  const pool = run.gpuPool();
  const onGpu = run.task.tier === 'full' && pool > 0;
  const gpus = run.checkGpuRequest(asked ?? (onGpu ? 1 : 0));
  if (onGpu && gpus === 0) {
    throw new A2rlError(
      'INVALID_INPUT',
      `On this server ${run.task.id}'s rollouts sample on a GPU (it has ${pool} per job): ask for gpus: 1 to ${pool}, or leave gpus out for 1.`,
    );
  }
  return gpus;
}

/** Most bytes of a rollout file the server reads back: the agent can write to it too. */
const maxBatchBytes = 64 * 2 ** 20;

/**
 * Reads a finished batch: its episodes, never more than were asked for, and their mean
 * reward. Where the task's reward is a judge's, the server judges each completion against
 * its reference first and writes the rewards into the file. The file lies in the agent's
 * workspace, so it is opened safely and read to a bound.
 */
async function collectBatch(run: Run, path: string, requested: number, cost: JobCost): Promise<RolloutSummary> {
  const read = readEpisodes(run.workspace, path);
  if ('unreadable' in read) {
    return {
      episodes: 0,
      mean_reward: null,
      episodes_per_second: null,
      cpu_seconds_per_episode: null,
      out: path,
      trajectories: null,
      unreadable: read.unreadable,
    };
  }
  const episodes = read.slice(0, requested);
  const rewritten = run.task.rollouts.reward === 'judge' && episodes.length > 0;
  if (rewritten) {
    const judgeable = episodes.every(
      (e) => typeof e.completion === 'string' && typeof e.reference === 'string' && typeof e.instruction === 'string',
    );
    if (!judgeable) throw new Error(`${path} has episodes without instruction, reference and completion`);
    const outcomes = await judgeAgainstReferences(
      run.judge,
      run.task,
      episodes.map((e, i) => ({
        id: String(i),
        instruction: String(e.instruction),
        constraints: e.constraints,
        candidate: String(e.completion),
        reference: String(e.reference),
      })),
    );
    episodes.forEach((episode, i) => (episode.reward = outcomes[i]!));
    run.workspace.replaceFile(path, episodes.map((e) => JSON.stringify(e)).join('\n') + '\n');
  }
  const rewards = episodes.map((e) => Number(e.return ?? e.reward)).map((r) => (Number.isFinite(r) ? r : 0));
  const summary: RolloutSummary = {
    episodes: episodes.length,
    mean_reward: mean(rewards),
    episodes_per_second: episodes.length > 0 && cost.wallSeconds > 0 ? round(episodes.length / cost.wallSeconds, 1) : null,
    cpu_seconds_per_episode: episodes.length > 0 ? round(cost.cpuSeconds / episodes.length, 4) : null,
    out: path,
    trajectories: recordTrajectories(run.home, episodes),
  };
  if (episodes.length > 0 && episodes.every((e) => typeof e.success === 'boolean')) {
    summary.success_rate = mean(episodes.map((e) => (e.success ? 1 : 0)))!;
  }
  return summary;
}

/** Keeps the episodes as the server read (and scored) them, once per distinct content. */
function recordTrajectories(home: string, episodes: Array<Record<string, unknown>>): RolloutSummary['trajectories'] {
  if (episodes.length === 0) return null;
  const content = episodes.map((e) => JSON.stringify(e)).join('\n') + '\n';
  const hash = sha256(content);
  const dir = trajectoriesDir(home);
  const file = join(dir, `${hash}.jsonl`);
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true });
    // Written aside and renamed, so a crash never leaves a partial file under its hash.
    const partial = `${file}.${process.pid}.partial`;
    writeFileSync(partial, content);
    renameSync(partial, file);
  }
  return { sha256: hash, bytes: Buffer.byteLength(content) };
}

function mean(values: number[]): number | null {
  if (values.length === 0) return null;
  return round(values.reduce((a, b) => a + b, 0) / values.length, 4);
}

function round(value: number, digits: number): number {
  return Math.round(value * 10 ** digits) / 10 ** digits;
}

/** Whether a path is a folder holding, for each entry of `required`, one of its files (never following a link). */
function isCheckpointFolder(workspace: Workspace, target: ResolvedPath, required: string[][]): boolean {
  let dir: SafeDir;
  try {
    dir = workspace.openDir(target);
  } catch (error) {
    // A link is refused with its own reason; absent or a file is simply not a checkpoint folder.
    if (isA2rlError(error, 'NOT_FOUND') || isA2rlError(error, 'INVALID_INPUT')) return false;
    throw error;
  }
  try {
    return required.every((names) => names.some((name) => dir.lstat(name)?.isFile()));
  } finally {
    dir.close();
  }
}

/**
 * The episodes of a batch file, or why it cannot be read: the agent can replace the file
 * (with a link, a folder, a pipe) before the server reads it back.
 */
function readEpisodes(workspace: Workspace, path: string): Array<Record<string, unknown>> | { unreadable: string } {
  let text: string;
  try {
    text = workspace.readBytes(path, maxBatchBytes).toString('utf8');
  } catch (error) {
    if (isA2rlError(error, 'NOT_FOUND')) return [];
    if (isA2rlError(error)) return { unreadable: error.message };
    throw error;
  }
  return text.split('\n').flatMap((line) => {
    try {
      const episode = JSON.parse(line) as unknown;
      return episode !== null && typeof episode === 'object' && !Array.isArray(episode) ? [episode as Record<string, unknown>] : [];
    } catch {
      // A line cut short by a stopped job is not an episode.
      return [];
    }
  });
}
