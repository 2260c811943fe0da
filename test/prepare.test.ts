import { spawnSync } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetsNotPreparedError, verifyAssets } from '../src/tasks/assets.js';
import { cliEntry } from '../src/util/paths.js';
import { fixtureModelId, writeFixtureHub } from './helpers/fixture-hub.js';
import { tempDir } from './helpers/sandbox.js';

// `a2rl prepare` end to end on a fixture hub (no hub is reachable here): the built CLI runs tasks/hflm/assets.py
// with .venv-full's python; the splits themselves are tested in tasks/hflm-tests/test_assets.py.
describe('a2rl prepare --from a snapshot folder', () => {
  let hub: string;
  let home: string;
  // A progress line at each file (A2RL_PROGRESS_SECONDS=0), so its output holds them whatever the machine's speed.
  const prepare = (into: string, ...args: string[]) =>
    spawnSync('node', [cliEntry, '--home', into, 'prepare', ...args], {
      encoding: 'utf8',
      env: { ...process.env, A2RL_PROGRESS_SECONDS: '0' },
    });

  beforeAll(() => {
    hub = writeFixtureHub();
    home = tempDir('home');
  });
  afterAll(() => {
    rmSync(hub, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it('writes the splits and the model with manifests, prints each file, and verifyAssets passes', async () => {
    const result = prepare(home, 'gsm8k', '--from', hub, '--model', fixtureModelId);
    expect(result.status, result.stderr).toBe(0);
    for (const file of ['assets/gsm8k/data/train.jsonl', 'assets/gsm8k/eval/public.jsonl', 'assets/gsm8k/eval/private.jsonl']) {
      expect(result.stdout).toMatch(new RegExp(`${join(home, file)}\\t\\d+ bytes\\tsha256 [0-9a-f]{64}\\n`));
    }
    expect(result.stdout).toContain(join(home, 'models', 'a2rl-fixture--tiny-qwen2', 'model.safetensors'));
    // Progress on stderr, one line a file here (src/util/progress.ts; its rate is tested in test/progress.test.ts).
    const files = result.stdout.trim().split('\n');
    const progress = result.stderr.split('\n').filter((line) => line.startsWith('  a2rl prepare gsm8k: '));
    expect(progress).toHaveLength(files.length);
    expect(progress.at(-1)).toMatch(
      new RegExp(`^  a2rl prepare gsm8k: ${files.length} done, \\d+(s|m\\d\\ds) so far; wrote ${home}/\\S+$`),
    );
    expect(readFileSync(join(home, 'assets', 'gsm8k', 'data', 'train.jsonl'), 'utf8').split('\n')).toHaveLength(6);
    await verifyAssets('gsm8k', home, fixtureModelId);
  });

  it('refuses a changed file, naming it and the command to run', async () => {
    const publicHalf = join(home, 'assets', 'gsm8k', 'eval', 'public.jsonl');
    const before = readFileSync(publicHalf);
    appendFileSync(publicHalf, '{"question": "extra", "answer": "#### 1"}\n');
    try {
      await verifyAssets('gsm8k', home, fixtureModelId);
      expect.unreachable('verifyAssets accepted a changed file');
    } catch (error) {
      expect(error).toBeInstanceOf(AssetsNotPreparedError);
      const refusal = error as AssetsNotPreparedError;
      expect(refusal.code).toBe('UNAVAILABLE');
      expect(refusal.prepareCommand).toBe(`a2rl --home ${home} prepare gsm8k --model ${fixtureModelId}`);
      expect(refusal.message).toBe(
        `The assets of gsm8k are not as prepared: ${publicHalf} has changed (its sha256 is not the manifest's). ` +
          `Run: a2rl --home ${home} prepare gsm8k --model ${fixtureModelId} (add --from DIR on a host without hub access).`,
      );
    }
    writeFileSync(publicHalf, before);
    await verifyAssets('gsm8k', home);
  });

  it('refuses assets never prepared, naming the command', async () => {
    await expect(verifyAssets('humaneval', home)).rejects.toThrow(
      `The assets of humaneval are not as prepared: ${join(home, 'assets', 'humaneval', 'manifest.json')} is missing. ` +
        `Run: a2rl --home ${home} prepare humaneval (add --from DIR on a host without hub access).`,
    );
  });

  it('an unknown task or a missing --from folder is refused, writing nothing', () => {
    const empty = tempDir('home');
    const unknown = prepare(empty, 'gsm9k', '--from', hub);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toBe(
      "hflm.assets: no full-tier task 'gsm9k': prepare one of gsm8k, humaneval, alpacaeval, alfworld, deepsearchqa, webshop, webshop-human\n",
    );
    const noFolder = prepare(empty, 'gsm8k', '--from', join(empty, 'nowhere'));
    expect(noFolder.status).toBe(2);
    expect(noFolder.stderr).toContain('no such folder; give a snapshot folder holding datasets/<repo id>/ and models/<model id>/');
    expect(readdirSync(empty)).toEqual([]);
    rmSync(empty, { recursive: true, force: true });
  });
});
