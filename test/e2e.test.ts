import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadReplay, playReplay } from '../src/replay.js';
import { summarizeRun } from '../src/report.js';
import { Store } from '../src/store.js';
import { getTask, listTaskIds } from '../src/tasks.js';
import { prepareDocker } from './helpers/docker.js';
import { startServer } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';

const dockerUnavailable = await prepareDocker();

describe('oracles end to end', () => {
  it.each(listTaskIds())(
    '%s: the oracle replay, through a real stdio client, beats the baseline by its margin within the default budget',
    { timeout: 30 * 60_000 },
    (taskId) => playOracle(taskId, []),
  );

  it.skipIf(dockerUnavailable)(
    `micro-gsm8k on the Docker sandbox backend: the oracle replay beats the baseline by its margin${dockerUnavailable ? ` (skipped: ${dockerUnavailable})` : ''}`,
    { timeout: 30 * 60_000 },
    () => playOracle('micro-gsm8k', ['--sandbox', 'docker']),
  );
});

async function playOracle(taskId: string, serverArgs: string[]): Promise<void> {
  const task = getTask(taskId);
  const home = tempDir('e2e');
  const client = await startServer({ home, task: taskId, label: 'oracle', serverArgs });
  let runId = '';
  try {
    const outcomes = await playReplay(client, loadReplay(task.paths.oracle), {
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
    expect(summary.baseline!.public).toBeGreaterThanOrEqual(2);
    expect(summary.baseline!.public).toBeLessThanOrEqual(30);
    expect(summary.improvement!.public).toBeGreaterThanOrEqual(task.oracle.minImprovement);
    expect(summary.improvement!.private).toBeGreaterThanOrEqual(task.oracle.minImprovement);
    expect(summary.compute_seconds).toBeLessThan(task.defaultLimits.computeSeconds);
    // The record holds every call of the replay and the jobs it started.
    expect(store.listEvents(runId, 'tool').length).toBeGreaterThanOrEqual(loadReplay(task.paths.oracle).steps.length);
    expect(store.listJobs(runId).map((job) => job.kind)).toEqual(expect.arrayContaining(['exec', 'training', 'rollouts', 'grading']));
    expect(store.getRun(runId)!.sandbox).toBe(serverArgs.includes('docker') ? 'docker' : 'bwrap');
  } finally {
    store.close();
  }
}
