import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadReplay, playReplay, type StepOutcome } from '../src/launch/replay.js';
import { baselineGradeOf } from '../src/core/submissions.js';
import { runIntegrity } from '../src/integrity/verdict.js';
import { Store } from '../src/store/store.js';
import { fullTierRuntimeTarget } from '../src/tasks/full-task.js';
import { getTaskFile, listTaskIds, type FullTaskFile } from '../src/tasks/task.js';
import { cliEntry, tasksRoot } from '../src/util/paths.js';
import { prepareDocker } from './helpers/docker.js';
import { writeFixtureHub } from './helpers/fixture-hub.js';
import { startServer } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';
import { startSmokeJudge } from './helpers/smoke-judge.js';

const dockerUnavailable = await prepareDocker();

/**
 * What a task's run needs beyond the base model, started before the server and stopped after it: an LLM-judged task
 * gets its smoke judge, a local test double of the paid LLM (test/helpers/smoke-judge.ts).
 */
const smokeServices: Record<string, () => Promise<{ serverArgs: string[]; close: () => Promise<void> }>> = {
  alpacaeval: async () => {
    const judge = await startSmokeJudge();
    return { serverArgs: ['--judge', 'llm', '--judge-url', judge.baseUrl, '--judge-model', 'smoke'], close: judge.close };
  },
};

/**
 * What a task's smoke replay shows beyond its margins, read from the results of the steps it saves by name (the replay's
 * own `expect` checks fields, not text). gsm8k's replay also looks around the workspace, samples rollouts and submits
 * pickled weights and the unchanged base, both refused: the served run an agent plays, each part proved once here.
 */
const smokeChecks: Record<string, (steps: Record<string, StepOutcome>, model: string) => void> = {
  gsm8k: (steps, model) => {
    expect(steps.brief!.text).toContain(`the base model, \`${model}\``);
    const look = steps.look!.structured!.output as string;
    expect(look).toContain('train.jsonl');
    expect(look).toContain('model.safetensors');
    expect(look).toMatch(/^hflm$/m);
    expect(look, 'the hidden halves stay out of the workspace').not.toContain('public.jsonl');
    expect(look).toContain(`${fullTierRuntimeTarget}/bin/python3`);
    expect(steps.pickled!.text).toMatch(/output\/pickled\/pytorch_model\.bin: pickled weights are never loaded .*safe_serialization=True/);
    expect(steps.unchanged!.text).toMatch(/models\/base is the base model unchanged.*; submitting it is refused/);
  },
};

/** Full-tier tasks with a CPU smoke profile. */
const smokeTasks = listTaskIds('full').filter((id) => (getTaskFile(id) as FullTaskFile).smoke !== undefined);

// Each full task end to end on CPU: assets prepared (the real prepare code) from the fixture hub's learnable smoke
// profile, the run served over stdio on the profile's tiny model, the oracle replay training with TRL in the sandbox
// and submitting a full model and a LoRA adapter, each graded by the task's own grader (and judge: smokeServices).
describe('full tier smoke profile', () => {
  let hub: string | undefined;

  it.each(smokeTasks)(
    '%s on bubblewrap: the smoke oracle beats the baseline by its margin; its full model and LoRA adapter are both graded',
    { timeout: 30 * 60_000 },
    (taskId) => playSmoke(taskId, 'bwrap'),
  );

  it.skipIf(dockerUnavailable).each(smokeTasks)(
    `%s on Docker: the same${dockerUnavailable ? ` (skipped: ${dockerUnavailable})` : ''}`,
    { timeout: 30 * 60_000 },
    (taskId) => playSmoke(taskId, 'docker'),
  );

  async function playSmoke(taskId: string, backend: string): Promise<void> {
    const smoke = (getTaskFile(taskId) as FullTaskFile).smoke!;
    const home = tempDir('smoke');
    hub ??= writeFixtureHub('smoke');
    const prepared = spawnSync('node', [cliEntry, '--home', home, 'prepare', taskId, '--from', hub, '--model', smoke.model], {
      encoding: 'utf8',
    });
    expect(prepared.status, prepared.stderr).toBe(0);

    const services = await smokeServices[taskId]?.();
    let runId = '';
    const saved: Record<string, StepOutcome> = {};
    try {
      const serverArgs = ['--base-model', smoke.model, '--sandbox', backend, ...(services?.serverArgs ?? [])];
      const client = await startServer({ home, task: taskId, label: 'smoke', serverArgs });
      try {
        await playReplay(client, loadReplay(join(tasksRoot, taskId, smoke.replay)), {
          onResult: (outcome) => {
            if (typeof outcome.structured?.run_id === 'string') runId = outcome.structured.run_id;
            if (outcome.step.save) saved[outcome.step.save] = outcome;
          },
        });
      } finally {
        await client.close();
      }
    } finally {
      await services?.close();
    }
    smokeChecks[taskId]?.(saved, smoke.model);
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const run = store.getRun(runId)!;
      expect(run.base_model).toBe(smoke.model);
      const baseline = baselineGradeOf(store, run);
      expect(baseline, 'the baseline is graded').toBeDefined();
      const submissions = store.listSubmissions(runId);
      expect(
        submissions.map((s) => s.path),
        'only the submitted folders, no row for a refused one',
      ).toEqual(['output/full', 'output/lora']);
      const margins: Record<string, number | undefined> = {
        'output/full': smoke.minImprovement,
        'output/lora': smoke.adapterMinImprovement,
      };
      for (const submission of submissions) {
        expect(submission.state, `${submission.path}: ${submission.error}`).toBe('graded');
        const grade = store.getGrade(taskId, run.grader_version, submission.content_hash)!;
        const margin = margins[submission.path];
        if (margin === undefined) continue;
        expect(grade.public_score - baseline!.public_score, `${submission.path} public`).toBeGreaterThanOrEqual(margin);
        expect(grade.private_score - baseline!.private_score, `${submission.path} private`).toBeGreaterThanOrEqual(margin);
      }
      expect(store.listJobs(runId).map((job) => job.kind)).toEqual(expect.arrayContaining(['exec', 'training', 'grading']));
      // Invariant 12: the server checked the ended run against the task's hidden items (a worker, before it exited); an
      // oracle, which trains on the visible split only, is clean.
      expect(runIntegrity(store, runId)).toMatchObject({ contamination: 'clean', flagged: false });
    } finally {
      store.close();
    }
  }
});
