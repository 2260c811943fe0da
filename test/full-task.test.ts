import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetsNotPreparedError } from '../src/tasks/assets.js';
import { fullTierRuntimeTarget, resolveFullTask } from '../src/tasks/full-task.js';
import { hashDirectory, sha256 } from '../src/util/hashing.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { fixtureModelId, writeFixtureHub } from './helpers/fixture-hub.js';
import { defaultLimits, makeSandbox, run, tempDir } from './helpers/sandbox.js';

// A full-tier task resolved for a run: its prepared assets checked, its paths, and its runtime in a real sandbox. A run of
// it served end to end on both backends (the workspace, rollouts, refused and graded submissions) is
// test/full-tier-smoke.test.ts, whose gsm8k replay plays what an agent does.
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

  it('refuses before the assets are prepared, naming the a2rl prepare command', async () => {
    try {
      await resolveFullTask('gsm8k', home, fixtureModelId);
      expect.unreachable('resolveFullTask accepted missing assets');
    } catch (error) {
      expect(error).toBeInstanceOf(AssetsNotPreparedError);
      expect((error as AssetsNotPreparedError).prepareCommand).toBe(`a2rl --home ${home} prepare gsm8k --model ${fixtureModelId}`);
    }
    // Without --model, the task's default model is the one checked and named.
    await expect(resolveFullTask('gsm8k', home)).rejects.toThrow(`prepare gsm8k --model Qwen/Qwen2.5-1.5B`);
  });

  it('a run of it is refused before anything is written, naming the a2rl prepare command (serve over stdio, runs create)', () => {
    const serve = spawnSync('node', [cliEntry, '--home', home, 'serve', '--task', 'gsm8k', '--base-model', fixtureModelId], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(serve.status).toBe(5); // unavailable (src/util/errors.ts, exitStatuses)
    expect(serve.stderr).toContain(`Run: a2rl --home ${home} prepare gsm8k --model ${fixtureModelId} (add --from DIR`);
    const create = spawnSync('node', [cliEntry, '--home', home, 'runs', 'create', '--task', 'gsm8k'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(create.status).toBe(5);
    expect(create.stderr).toContain(`prepare gsm8k --model Qwen/Qwen2.5-1.5B`);
    const micro = spawnSync('node', [cliEntry, '--home', home, 'runs', 'create', '--task', 'micro-gsm8k', '--base-model', 'a/b'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(micro.status).toBe(2);
    expect(micro.stderr).toContain('micro-gsm8k is a micro-tier task and ships its own base model; drop --base-model.');
    // A full-tier judged task never falls back to the rubric judge.
    const judged = spawnSync('node', [cliEntry, '--home', home, 'runs', 'create', '--task', 'alpacaeval'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(judged.status).toBe(2);
    expect(judged.stderr).toContain('alpacaeval grades with an LLM judge: start it with --judge llm --judge-url URL --judge-model NAME');
    expect(existsSync(join(home, 'runs')), 'a refused run leaves no run folder').toBe(false);
  });

  it('refuses what is not a full-tier task or not a model id, saying what to give', async () => {
    await expect(resolveFullTask('micro-gsm8k', home)).rejects.toThrow(/micro-gsm8k is a micro-tier task/);
    await expect(resolveFullTask('gsm9k', home)).rejects.toThrow(/No task "gsm9k"/);
    await expect(resolveFullTask('gsm8k', home, '../etc')).rejects.toThrow(/is not a Hugging Face model id/);
  });

  it('once prepared: the visible split, the hidden halves apart, the base model, the runtime', async () => {
    const prepared = spawnSync('node', [cliEntry, '--home', home, 'prepare', 'gsm8k', '--from', hub, '--model', fixtureModelId], {
      encoding: 'utf8',
    });
    expect(prepared.status, prepared.stderr).toBe(0);
    const task = await resolveFullTask('gsm8k', home, fixtureModelId);
    expect(task.modelId).toBe(fixtureModelId);
    expect(readdirSync(task.paths.trainData)).toEqual(['train.jsonl']);
    expect(readdirSync(task.paths.evalData).sort()).toEqual(['private.jsonl', 'public.jsonl']);
    expect(task.paths.baseModel).toBe(join(home, 'models', 'a2rl-fixture--tiny-qwen2'));
    expect(task.pythonRuntime.mounts).toEqual([{ source: join(packageRoot, '.venv-full'), target: fullTierRuntimeTarget, readOnly: true }]);
    // The baseline's key is what a submitted copy of the base would hash to, computed from the verified manifest.
    expect(task.baseModelHash).toBe(hashDirectory(task.paths.baseModel));
    // What a grade's environment record names (src/grading/environment.ts), found here once: gsm8k has no stand-ins.
    const assetsManifest = sha256(readFileSync(join(task.paths.trainData, '..', 'manifest.json')));
    expect(task.environment).toEqual({ packages: [], assetsManifest });
  });

  it('the runtime mounts read-only in a sandbox: the pinned packages and hflm import, the submission check runs', async () => {
    const task = await resolveFullTask('gsm8k', home, fixtureModelId);
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
});
