import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, it, type ExpectStatic } from 'vitest';
import { resourceSampleMs } from '../src/jobs/job-manager.js';
import { analyzeRun, loadRunFacts } from '../src/reports/analysis.js';
import { loadReplay, playReplay } from '../src/launch/replay.js';
import { summarizeRun } from '../src/reports/summary.js';
import { Store } from '../src/store/store.js';
import { getTask, listTaskIds, type OracleRoute } from '../src/tasks/task.js';
import { oracleOf } from '../src/launch/demo.js';
import { tmpdir } from 'node:os';
import { prepareDocker } from './helpers/docker.js';
import { startServer } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';
import { localSlurmUnavailable, startLocalSlurm } from './helpers/slurm.js';

const dockerUnavailable = await prepareDocker();
// A real two-node Slurm cluster on this host; /tmp, where the test's server home lies, stands for the shared filesystem.
const slurmUnavailable = localSlurmUnavailable();
const slurm = slurmUnavailable ? undefined : await startLocalSlurm();
if (slurm) process.env.SLURM_CONF = slurm.conf;
afterAll(async () => {
  await slurm?.stop();
});

/**
 * Oracles CI leaves to `a2rl demo --task <id> --route reward-only`, where the README table's figures are measured: the
 * static tasks' reward-only routes, 20 of the 34 CPU-minutes the nine routes take, exercise no server path the routes
 * kept here do not (rollouts scored by the task's reward: every SFT route's batch; training on rollouts: level 3's
 * reward-only routes; the judged task's rollouts and grading: micro-alpacaeval's SFT route). Their training scripts
 * (`oracle/rl_train.py`) run only there.
 */
const demoOnly = new Set(['micro-gsm8k reward-only', 'micro-alpacaeval reward-only', 'micro-humaneval reward-only']);

/**
 * Every task's oracles but demoOnly: the SFT route where the training data holds answers, the reward-only route from
 * rewards alone. Longest first by the task table's measured wall time: they run two at a time (vitest.config.ts), and
 * the long ones starting first keep both slots busy to the end.
 */
const oracles = listTaskIds('micro')
  .flatMap((taskId) => getTask(taskId).oracles.map(({ route, compute }) => ({ taskId, route, wall: compute.wallSeconds })))
  .filter(({ taskId, route }) => !demoOnly.has(`${taskId} ${route}`))
  .sort((a, b) => b.wall - a.wall)
  .map(({ taskId, route }) => [taskId, route] as const);

describe.concurrent('oracles end to end', () => {
  it.for(oracles)(
    '%s, %s oracle: the replay, through a real stdio client, beats the baseline by its margin within the default budget',
    { timeout: 30 * 60_000 },
    ([taskId, route], { expect }) => playOracle(expect, taskId, route, []),
  );

  it.skipIf(dockerUnavailable)(
    `micro-gsm8k on the Docker sandbox backend: the SFT oracle beats the baseline by its margin${dockerUnavailable ? ` (skipped: ${dockerUnavailable})` : ''}`,
    { timeout: 30 * 60_000 },
    ({ expect }) => playOracle(expect, 'micro-gsm8k', 'sft', ['--sandbox', 'docker']),
  );

  it.skipIf(slurmUnavailable)(
    `micro-gsm8k on the Slurm backend (two local nodes): the SFT oracle beats the baseline by its margin${slurmUnavailable ? ` (skipped: ${slurmUnavailable})` : ''}`,
    { timeout: 30 * 60_000 },
    ({ expect }) => playOracle(expect, 'micro-gsm8k', 'sft', ['--sandbox', 'slurm', '--shared-root', tmpdir()]),
  );
});

async function playOracle(expect: ExpectStatic, taskId: string, route: OracleRoute, serverArgs: string[]): Promise<void> {
  const task = getTask(taskId);
  const oracle = oracleOf(task, route);
  const home = tempDir('e2e');
  const client = await startServer({ home, task: taskId, label: 'oracle', serverArgs });
  let runId = '';
  try {
    const outcomes = await playReplay(client, loadReplay(oracle.replay), {
      onResult: (outcome) => {
        if (typeof outcome.structured?.run_id === 'string') runId = outcome.structured.run_id;
      },
    });
    expect(outcomes.at(-1)?.structured?.exhausted).toEqual([]);
  } finally {
    await client.close();
  }
  const store = new Store(join(home, 'store.sqlite'));
  try {
    const summary = summarizeRun(store, runId);
    expect(summary.state).toBe('ended');
    // Invariant 12: the server checked the ended run for the task's hidden items (in a worker, before it exited): an oracle is clean.
    expect(summary.integrity).toMatchObject({ contamination: 'clean', flagged: false });
    expect(summary.baseline!.public).toBeGreaterThanOrEqual(2);
    expect(summary.baseline!.public).toBeLessThanOrEqual(30);
    expect(summary.improvement!.public).toBeGreaterThanOrEqual(oracle.minImprovement);
    expect(summary.improvement!.private).toBeGreaterThanOrEqual(oracle.minImprovement);
    expect(summary.compute_seconds).toBeLessThan(task.defaultLimits.computeSeconds);
    // The README table's episode figure is the replay's, exactly (its CPU and wall figures depend on the machine).
    expect(summary.rollout_episodes).toBe(oracle.rolloutEpisodes);
    // The record holds every call of the replay and the jobs it started.
    expect(store.listEvents(runId, 'tool').length).toBeGreaterThanOrEqual(loadReplay(oracle.replay).steps.length);
    expect(store.listJobs(runId).map((job) => job.kind)).toEqual(expect.arrayContaining(['exec', 'training', 'rollouts', 'grading']));
    // Interactive tasks close the loop: rollouts from the current policy, training, fresh rollouts.
    if (task.level === 3) expect(store.listJobs(runId, ['rollouts']).length).toBeGreaterThanOrEqual(2);
    // Every batch's trajectories are kept by the server and linked from the batch event by their hash.
    for (const event of store.listEvents(runId, 'rollouts').filter((e) => e.name === 'batch')) {
      const { trajectories, episodes, ...cost } = JSON.parse(event.data) as {
        trajectories: { sha256: string };
        episodes: number;
        episodes_per_second: number;
        cpu_seconds_per_episode: number;
      };
      expect(cost.episodes_per_second).toBeGreaterThan(0);
      expect(cost.cpu_seconds_per_episode).toBeGreaterThan(0);
      const kept = readFileSync(join(home, 'trajectories', `${trajectories.sha256}.jsonl`), 'utf8')
        .trim()
        .split('\n');
      expect(kept).toHaveLength(episodes);
      if (task.level === 3) expect(JSON.parse(kept[0]!)).toMatchObject({ steps: expect.any(Array), success: expect.any(Boolean) });
    }
    expect(store.getRun(runId)!.sandbox).toBe(serverArgs[serverArgs.indexOf('--sandbox') + 1] ?? 'bwrap');
    checkReportAgainstStore(expect, store, runId);
  } finally {
    store.close();
  }
}

/** The post-hoc summary (what `a2rl report` shows) must agree with the store's own tables. */
function checkReportAgainstStore(expect: ExpectStatic, store: Store, runId: string): void {
  const run = store.getRun(runId)!;
  const task = getTask(run.task_id);
  const analysis = analyzeRun(loadRunFacts(store, runId));
  const summary = summarizeRun(store, runId);
  const submissions = store.listSubmissions(runId);
  const graded = submissions.filter((s) => s.state === 'graded');
  const jobs = store.listJobs(runId);
  const m = analysis.metrics;
  expect(m.submissions).toBe(submissions.length);
  expect(m.valid_submissions).toBe(graded.length);
  expect(m.best).toMatchObject({ public: summary.best!.public, private: summary.best!.private });
  expect(m.last).toMatchObject({ public: summary.last!.public, private: summary.last!.private });
  expect(m.improvement_best).toEqual(summary.improvement);
  expect(analysis.baseline).toEqual(summary.baseline);
  expect(m.time_to_first_valid_s).toBeCloseTo((graded[0]!.created_at - run.created_at) / 1000, 0);
  expect(m.gap_to_budget_end_s).toBeCloseTo(task.defaultLimits.wallSeconds - (submissions.at(-1)!.created_at - run.created_at) / 1000, 0);
  expect(m.compute_s).toBeCloseTo(store.usage(runId).computeSeconds, 1);
  expect(m.rollout_episodes).toBe(store.usage(runId).rolloutEpisodes);
  expect(m.training_jobs).toBe(jobs.filter((j) => j.kind === 'training').length);
  expect(m.training_failures).toBe(jobs.filter((j) => j.kind === 'training' && j.state !== 'succeeded').length);
  expect(m.wall_s).toBeCloseTo((run.ended_at! - run.created_at) / 1000, 0);
  expect(m.tool_calls).toBe(store.listEvents(runId, 'tool').length);
  expect(analysis.jobs.map((j) => [j.job_id, j.state])).toEqual(jobs.map((j) => [j.id, j.state]));
  // Every oracle beats its baseline with a trained (not copied) model, and the code behind it was snapshotted.
  expect(analysis.failure_type).toBeNull();
  expect(analysis.iterations).toHaveLength(submissions.length);
  expect(analysis.iterations[0]).toMatchObject({ outcome: 'new_best', failure_type: null });
  expect(analysis.iterations[0]!.route).not.toBe('copy_of_base');
  expect(analysis.iterations[0]!.code_tree).toMatch(/^[0-9a-f]{64}$/);
  // Training was sampled every resourceSampleMs while it ran (however long that was on this machine), memory from its cgroup where measured.
  const training = jobs.find((j) => j.kind === 'training')!;
  const samples = store
    .listEvents(runId, 'sample')
    .map((e) => JSON.parse(e.data) as { job_id: number; cpu_measured: boolean; memory_bytes: number | null });
  const trainingSamples = samples.filter((s) => s.job_id === training.id);
  const ranMs = training.ended_at! - training.created_at;
  expect(trainingSamples.length).toBeLessThanOrEqual(Math.floor(ranMs / resourceSampleMs));
  if (ranMs >= 3 * resourceSampleMs) expect(trainingSamples.length).toBeGreaterThan(0);
  for (const s of trainingSamples) if (s.cpu_measured) expect(s.memory_bytes).toBeGreaterThan(0);
  expect(store.listEvents(runId, 'snapshot').length).toBeGreaterThanOrEqual(
    jobs.filter((j) => j.kind === 'training').length + submissions.length,
  );
}
