import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync } from 'node:fs';
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
import { fullTierPython, writeFixtureHub } from './helpers/fixture-hub.js';
import { call, settledBaseline, startServer, waitJob } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';
import { startDeepsearchqaServices } from './helpers/deepsearchqa-services.js';
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
  // Search answered by a local corpus (the smoke profile's, fixture_smoke_deepsearchqa) and DeepSearchQA's binary judge.
  deepsearchqa: async () => {
    const corpus = join(tempDir('smoke-corpus'), 'corpus.jsonl');
    const fixture = join(tasksRoot, 'hflm-tests', 'fixture_smoke_deepsearchqa.py');
    execFileSync(fullTierPython, [fixture, '--profile', 'smoke', '--corpus', corpus], { stdio: 'pipe' });
    return startDeepsearchqaServices(corpus, 'smoke');
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

/**
 * The backend each task's smoke oracle plays on: Docker for these, bubblewrap for the others. The other backend serves
 * the same prepared task for a short run (servedRun): what differs between backends is the sandbox a job, a rollouts
 * batch and a grading run in, which that run exercises, not the training, which would only repeat minutes of CPU.
 */
const oracleOnDocker = new Set(['gsm8k', 'alpacaeval']);
const backends = [
  { name: 'bwrap', title: 'bubblewrap', unavailable: undefined },
  { name: 'docker', title: 'Docker', unavailable: dockerUnavailable },
] as const;

// Each full task end to end on CPU: assets prepared (the real prepare code) from the fixture hub's learnable smoke
// profile, the run served over stdio on the profile's tiny model, the oracle replay training with TRL in the sandbox
// and submitting a full model (and, where `smoke.adapter` asks, a LoRA adapter), each graded by the task's own grader (and
// judge: smokeServices).
describe('full tier smoke profile', () => {
  let hub: string | undefined;
  /** Each task's baseline as first graded, to compare with the other backend's. */
  const baselines = new Map<string, { public: number; private: number }>();

  for (const taskId of smokeTasks) {
    const oracleBackend = oracleOnDocker.has(taskId) ? 'docker' : 'bwrap';
    for (const backend of backends) {
      const skipped = backend.unavailable ? ` (skipped: ${backend.unavailable})` : '';
      if (backend.name === oracleBackend) {
        it.skipIf(backend.unavailable)(
          `${taskId} on ${backend.title}: the smoke oracle beats the baseline by its margin${(getTaskFile(taskId) as FullTaskFile).smoke!.adapter ? '; its full model and LoRA adapter are both graded' : ''}${skipped}`,
          { timeout: 30 * 60_000 },
          () => playSmoke(taskId, backend.name),
        );
      } else {
        it.skipIf(backend.unavailable)(
          `${taskId} on ${backend.title}: served from the same assets, a rollouts batch and the baseline's grading run in its sandboxes, to the same baseline${skipped}`,
          { timeout: 15 * 60_000 },
          () => servedRun(taskId, backend.name),
        );
      }
    }
  }

  /** Each task's home as `a2rl prepare` left it (from the smoke hub, for its smoke model): prepared once, copied per test. */
  const preparedHomes = new Map<string, string>();

  /** A new home with the task prepared: a copy of the prepared one, the assets its server verifies against their manifests. */
  function preparedHome(taskId: string): string {
    let prepared = preparedHomes.get(taskId);
    if (!prepared) {
      const smoke = (getTaskFile(taskId) as FullTaskFile).smoke!;
      prepared = tempDir('smoke-prepared');
      hub ??= writeFixtureHub('smoke');
      const run = spawnSync('node', [cliEntry, '--home', prepared, 'prepare', taskId, '--from', hub, '--model', smoke.model], {
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);
      preparedHomes.set(taskId, prepared);
    }
    const home = tempDir('smoke');
    cpSync(prepared, home, { recursive: true });
    return home;
  }

  /** The baseline's grade, checked against the other backend's where that ran first: greedy grading is the same anywhere. */
  function sameBaseline(taskId: string, baseline: { public: number; private: number }): void {
    const other = baselines.get(taskId);
    if (other) expect(baseline, 'the baseline is the same on both backends').toEqual(other);
    else baselines.set(taskId, baseline);
  }

  async function servedRun(taskId: string, backend: string): Promise<void> {
    const smoke = (getTaskFile(taskId) as FullTaskFile).smoke!;
    const home = preparedHome(taskId);
    const services = await smokeServices[taskId]?.();
    try {
      const serverArgs = ['--base-model', smoke.model, '--sandbox', backend, ...(services?.serverArgs ?? [])];
      const client = await startServer({ home, task: taskId, label: 'smoke-served', serverArgs });
      try {
        const look = await call(client, 'exec', { command: 'ls data models/base lib' });
        expect(look.structured.exit_code, look.text).toBe(0);
        expect(look.structured.output).toContain('model.safetensors');
        const batch = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2, group_size: 2 });
        expect(batch.isError, batch.text).toBe(false);
        const job = await waitJob(client, batch.structured.job_id);
        expect(job.state, `the rollouts batch on ${backend}`).toBe('succeeded');
        const baseline = await settledBaseline(client);
        expect(baseline.state, baseline.error ?? '').toBe('graded');
      } finally {
        await client.close();
      }
    } finally {
      await services?.close();
    }
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const run = store.getRun(store.listRuns()[0]!.id)!;
      expect(run.sandbox).toBe(backend);
      const baseline = baselineGradeOf(store, run)!;
      sameBaseline(taskId, { public: baseline.public_score, private: baseline.private_score });
      expect(store.listJobs(run.id).map((j) => [j.kind, j.state])).toEqual(
        expect.arrayContaining([
          ['rollouts', 'succeeded'],
          ['grading', 'succeeded'],
        ]),
      );
    } finally {
      store.close();
    }
  }

  async function playSmoke(taskId: string, backend: string): Promise<void> {
    const smoke = (getTaskFile(taskId) as FullTaskFile).smoke!;
    const home = preparedHome(taskId);

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
      expect(run.sandbox).toBe(backend);
      const baseline = baselineGradeOf(store, run);
      expect(baseline, 'the baseline is graded').toBeDefined();
      sameBaseline(taskId, { public: baseline!.public_score, private: baseline!.private_score });
      const submissions = store.listSubmissions(runId);
      expect(
        submissions.map((s) => s.path),
        'only the submitted folders, no row for a refused one',
      ).toEqual(smoke.adapter ? ['output/full', 'output/lora'] : ['output/full']);
      const margins: Record<string, number | undefined> = {
        'output/full': smoke.minImprovement,
        'output/lora': smoke.adapter?.minImprovement,
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
