import { closeSync, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { A2rlError } from './errors.js';
import type { Run } from './run.js';
import type { JobRow } from './store.js';
import { readAt, openForRead } from './safe-fs.js';
import { sandboxWorkspace, type Workspace } from './workspace.js';

export interface RolloutRequest {
  checkpoint: string;
  episodes: number;
  groupSize: number;
  temperature: number;
  /** Defaults to the batch number, so repeated calls sample different prompts. */
  seed?: number;
}

export interface RolloutSummary {
  episodes: number;
  mean_reward: number | null;
  out: string;
}

/**
 * Starts the task's rollout sampler in the run's sandbox: episodes with a checkpoint as
 * policy, scored by the task's reward, written as JSONL under rollouts/. Episodes are
 * reserved when the job starts and charged as produced when it ends.
 */
export function launchRollouts(run: Run, request: RolloutRequest): { job: JobRow; out: string } {
  if (request.episodes % request.groupSize !== 0) {
    throw new A2rlError(
      'INVALID_INPUT',
      `episodes (${request.episodes}) must be a multiple of group_size (${request.groupSize}), e.g. ${request.groupSize * Math.max(1, Math.round(request.episodes / request.groupSize))}.`,
    );
  }
  const checkpoint = run.workspace.resolve(request.checkpoint, 'read');
  const required = run.task.submission.requiredFiles;
  if (
    !existsSync(checkpoint.hostPath) ||
    !statSync(checkpoint.hostPath).isDirectory() ||
    !required.every((f) => existsSync(join(checkpoint.hostPath, f)))
  ) {
    throw new A2rlError(
      'INVALID_INPUT',
      `${checkpoint.path} is not a checkpoint folder (it needs ${required.join(' and ')}). Use models/base or a folder your training saved.`,
    );
  }
  const batch = run.engine.store.listJobs(run.id, ['rollouts']).length + 1;
  const out = `rollouts/batch-${String(batch).padStart(3, '0')}.jsonl`;
  const options: Record<string, string | number> = {
    checkpoint: `${sandboxWorkspace}/${checkpoint.path}`,
    data: `${sandboxWorkspace}/${run.task.rolloutData}`,
    n: request.episodes,
    'group-size': request.groupSize,
    temperature: request.temperature,
    seed: request.seed ?? batch,
    out: `${sandboxWorkspace}/${out}`,
  };
  const argv = [
    '/usr/bin/python3',
    '-m',
    `${run.task.env.package}.rollouts`,
    ...Object.entries(options).flatMap(([k, v]) => [`--${k}`, String(v)]),
  ];
  const job = run.startJob('rollouts', {
    command: argv.slice(1).join(' '),
    argv,
    limits: run.jobLimits(),
    episodesRequested: request.episodes,
    collect: () => {
      const summary = summarise(run.workspace, out, request.episodes);
      run.record('rollouts', 'batch', { ...summary, checkpoint: checkpoint.path });
      return { episodesDone: summary.episodes, result: summary };
    },
  });
  return { job, out };
}

/** Most bytes of a rollout file the server reads back: the agent can write to it too. */
const maxSummaryBytes = 64 * 2 ** 20;

/**
 * Counts the episodes of a finished batch and their mean reward. The file lies in the
 * agent's workspace, so it is opened safely, read to a bound, and never counted past what
 * the job was asked for.
 */
function summarise(workspace: Workspace, path: string, requested: number): RolloutSummary {
  let text = '';
  try {
    const target = workspace.resolve(path, 'read');
    const fd = openForRead(target.hostPath, target.base, path);
    try {
      text = readAt(fd, 0, maxSummaryBytes).toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return { episodes: 0, mean_reward: null, out: path };
  }
  let episodes = 0;
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.trim() || episodes >= requested) continue;
    try {
      const reward = Number((JSON.parse(line) as { reward?: unknown }).reward);
      episodes += 1;
      total += Number.isFinite(reward) ? reward : 0;
    } catch {
      // A line cut short by a stopped job is not an episode.
    }
  }
  return { episodes, mean_reward: episodes ? Math.round((total / episodes) * 1e4) / 1e4 : null, out: path };
}
