import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetsNotPreparedError } from '../src/tasks/assets.js';
import { fullTierRuntimeTarget, resolveFullTask } from '../src/tasks/full-task.js';
import { hashDirectory } from '../src/util/hashing.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { fixtureModelId, writeFixtureHub } from './helpers/fixture-hub.js';
import { prepareDocker } from './helpers/docker.js';
import { call, startServer, waitJob, waitScore } from './helpers/mcp.js';
import { defaultLimits, makeSandbox, run, tempDir } from './helpers/sandbox.js';

const dockerUnavailable = await prepareDocker();

// A full-tier task resolved for a run: its prepared assets checked, its paths, and its runtime in a real sandbox.
describe('full-tier task: assets and runtime for a run', () => {
  let hub: string;
  let home: string;

  beforeAll(() => {
    hub = writeFixtureHub();
    home = tempDir('home');
  });
  afterAll(() => {
    rmSync(hub, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it('refuses before the assets are prepared, naming the a2rl prepare command', () => {
    try {
      resolveFullTask('gsm8k', home, fixtureModelId);
      expect.unreachable('resolveFullTask accepted missing assets');
    } catch (error) {
      expect(error).toBeInstanceOf(AssetsNotPreparedError);
      expect((error as AssetsNotPreparedError).prepareCommand).toBe(`a2rl --home ${home} prepare gsm8k --model ${fixtureModelId}`);
    }
    // Without --model, the task's default model is the one checked and named.
    expect(() => resolveFullTask('gsm8k', home)).toThrow(`prepare gsm8k --model Qwen/Qwen2.5-1.5B`);
  });

  it('a run of it is refused before anything is written, naming the a2rl prepare command (serve over stdio, runs create)', () => {
    const serve = spawnSync('node', [cliEntry, '--home', home, 'serve', '--task', 'gsm8k', '--base-model', fixtureModelId], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(serve.status).toBe(1);
    expect(serve.stderr).toContain(`Run: a2rl --home ${home} prepare gsm8k --model ${fixtureModelId} (add --from DIR`);
    const create = spawnSync('node', [cliEntry, '--home', home, 'runs', 'create', '--task', 'gsm8k'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(create.status).toBe(1);
    expect(create.stderr).toContain(`prepare gsm8k --model Qwen/Qwen2.5-1.5B`);
    const micro = spawnSync('node', [cliEntry, '--home', home, 'runs', 'create', '--task', 'micro-gsm8k', '--base-model', 'a/b'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(micro.status).toBe(1);
    expect(micro.stderr).toContain('micro-gsm8k is a micro-tier task and ships its own base model; drop --base-model.');
    // A full-tier judged task never falls back to the rubric judge.
    const judged = spawnSync('node', [cliEntry, '--home', home, 'runs', 'create', '--task', 'alpacaeval'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(judged.status).toBe(1);
    expect(judged.stderr).toContain('alpacaeval grades with an LLM judge: start it with --judge llm --judge-url URL --judge-model NAME');
    expect(existsSync(join(home, 'runs')), 'a refused run leaves no run folder').toBe(false);
  });

  it('refuses what is not a full-tier task or not a model id, saying what to give', () => {
    expect(() => resolveFullTask('micro-gsm8k', home)).toThrow(/micro-gsm8k is a micro-tier task/);
    expect(() => resolveFullTask('gsm9k', home)).toThrow(/No task "gsm9k"/);
    expect(() => resolveFullTask('gsm8k', home, '../etc')).toThrow(/is not a Hugging Face model id/);
  });

  it('once prepared: the visible split, the hidden halves apart, the base model, the runtime', () => {
    const prepared = spawnSync('node', [cliEntry, '--home', home, 'prepare', 'gsm8k', '--from', hub, '--model', fixtureModelId], {
      encoding: 'utf8',
    });
    expect(prepared.status, prepared.stderr).toBe(0);
    const task = resolveFullTask('gsm8k', home, fixtureModelId);
    expect(task.modelId).toBe(fixtureModelId);
    expect(readdirSync(task.paths.trainData)).toEqual(['train.jsonl']);
    expect(readdirSync(task.paths.evalData).sort()).toEqual(['private.jsonl', 'public.jsonl']);
    expect(task.paths.baseModel).toBe(join(home, 'models', 'a2rl-fixture--tiny-qwen2'));
    expect(task.pythonRuntime.mounts).toEqual([{ source: join(packageRoot, '.venv-full'), target: fullTierRuntimeTarget, readOnly: true }]);
    // The baseline's key is what a submitted copy of the base would hash to, computed from the verified manifest.
    expect(task.baseModelHash).toBe(hashDirectory(task.paths.baseModel));
  });

  it('the runtime mounts read-only in a sandbox: the pinned packages and hflm import, the submission check runs', async () => {
    const task = resolveFullTask('gsm8k', home, fixtureModelId);
    const { sandbox, workspace } = await makeSandbox({
      mounts: [
        ...task.pythonRuntime.mounts,
        { source: task.libraries[0]!.source, target: '/opt/a2rl/lib/hflm', readOnly: true },
        { source: task.paths.baseModel, target: '/opt/a2rl/base', readOnly: true },
      ],
      // As a run's sandbox hides them: the store (and so the hidden halves) and the package root.
      hidden: [home, packageRoot],
      env: { ...task.pythonRuntime.env, PYTHONPATH: '/opt/a2rl/lib' },
    });
    try {
      const imports = await run(
        sandbox,
        'python3 -c "import sys, torch, transformers, peft, trl, hflm; print(sys.prefix)" && ' +
          'python3 -m hflm.submission check /opt/a2rl/base --base /opt/a2rl/base',
        { ...defaultLimits, memoryBytes: 2 * 2 ** 30 },
      );
      expect(imports.exitCode, imports.output).toBe(0);
      expect(imports.output).toContain(`${fullTierRuntimeTarget}\n`);
      expect(imports.output).toMatch(/\{"ok": true, "kind": "full"/);
      const write = await run(sandbox, `touch ${fullTierRuntimeTarget}/x 2>&1; ls ${home} 2>&1; ls ${task.paths.evalData} 2>&1; true`);
      expect(write.output).toMatch(/Read-only file system/);
      expect(write.output).not.toContain('public.jsonl');
    } finally {
      await sandbox.destroy();
      rmSync(workspace, { recursive: true, force: true });
    }
  });

  it('a run of it is served over stdio: its workspace and runtime, the baseline, a full model and a LoRA adapter graded', async () => {
    await playServedRun(home, []);
  });

  it.skipIf(dockerUnavailable)(
    `the same on the Docker backend: the runtime mounts into the image, jobs and gradings run in containers${dockerUnavailable ? ` (skipped: ${dockerUnavailable})` : ''}`,
    { timeout: 600_000 },
    async () => {
      const dockerHome = tempDir('home-docker');
      const prepared = spawnSync('node', [cliEntry, '--home', dockerHome, 'prepare', 'gsm8k', '--from', hub, '--model', fixtureModelId], {
        encoding: 'utf8',
      });
      expect(prepared.status, prepared.stderr).toBe(0);
      await playServedRun(dockerHome, ['--sandbox', 'docker']);
      rmSync(dockerHome, { recursive: true, force: true });
    },
  );
});

/** A served gsm8k run as an agent plays it: look around, sample rollouts, submit refused and accepted folders, read the scores. */
async function playServedRun(home: string, serverArgs: string[]): Promise<void> {
  const client = await startServer({ home, task: 'gsm8k', serverArgs: ['--base-model', fixtureModelId, ...serverArgs] });
  try {
    const look = await call(client, 'exec', {
      command: 'ls data models/base lib; ls /opt/a2rl; command -v python3; python3 -c "import trl, peft, hflm; print(\'imports ok\')"',
    });
    expect(look.structured.exit_code, look.structured.output).toBe(0);
    const output = look.structured.output as string;
    expect(output).toContain('train.jsonl');
    expect(output).toContain('model.safetensors');
    expect(output).toMatch(/^hflm$/m);
    expect(output).not.toContain('public.jsonl');
    expect(output).toContain(`${fullTierRuntimeTarget}/bin/python3`);
    expect(output).toContain('imports ok');
    const brief = await call(client, 'read_file', { path: 'instructions.md' });
    expect(brief.structured.content).toContain(`the base model, \`${fixtureModelId}\``);

    // launch_rollouts with hflm's sampler: the grader's prompt, sampled, scored by the task's reward.
    const rollouts = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 4, group_size: 2 });
    expect(rollouts.isError, rollouts.text).toBe(false);
    const batch = (await waitJob(client, rollouts.structured.job_id)) as Record<string, any>;
    expect(batch.state, JSON.stringify(batch)).toBe('succeeded');
    expect(batch.result.episodes).toBe(4);
    expect([0, 0.25, 0.5, 0.75, 1]).toContain(batch.result.mean_reward);

    await call(client, 'write_file', { path: 'code/make.py', content: makeCheckpoints });
    const made = await call(client, 'exec', { command: 'python3 code/make.py' });
    expect(made.structured.exit_code, made.structured.output).toBe(0);
    const pickled = await call(client, 'submit_artifact', { path: 'output/pickled' });
    expect(pickled.isError).toBe(true);
    expect(pickled.text).toMatch(/output\/pickled\/pytorch_model\.bin: pickled weights are never loaded .*safe_serialization=True/);
    const unchanged = await call(client, 'submit_artifact', { path: 'models/base' });
    expect(unchanged.text).toMatch(/is the base model unchanged/);
    const ids: string[] = [];
    for (const path of ['output/full', 'output/lora']) {
      const submitted = await call(client, 'submit_artifact', { path });
      expect(submitted.isError, submitted.text).toBe(false);
      ids.push(submitted.structured.submission_id as string);
    }
    expect((await call(client, 'budget_status')).structured.submissions.used, 'refused folders cost no submission').toBe(2);
    for (const id of ids) {
      const score = (await waitScore(client, id)).submissions[0];
      expect(score.state, JSON.stringify(score)).toBe('graded');
      expect(score.metrics.total).toBeGreaterThan(0);
    }
    const scores = (await call(client, 'get_score')).structured;
    expect(scores.baseline.state).toBe('graded');
  } finally {
    await client.close();
  }
}

/** What an agent's job writes: a changed full model, a LoRA adapter (random, not zero, so it changes the model) and pickled weights. */
const makeCheckpoints = `
import os, shutil, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from peft import LoraConfig, get_peft_model
model = AutoModelForCausalLM.from_pretrained("models/base")
with torch.no_grad():
    model.lm_head.weight.add_(0.01)
model.save_pretrained("output/full")
AutoTokenizer.from_pretrained("models/base").save_pretrained("output/full")
lora = get_peft_model(AutoModelForCausalLM.from_pretrained("models/base"), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
lora.save_pretrained("output/lora")
os.makedirs("output/pickled")
torch.save(model.state_dict(), "output/pickled/pytorch_model.bin")
shutil.copy("models/base/config.json", "output/pickled/config.json")
`;
