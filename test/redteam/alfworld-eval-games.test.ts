import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { cliEntry, tasksRoot } from '../../src/util/paths.js';
import { fullTierPython, writeFixtureHub } from '../helpers/fixture-hub.js';
import { call, startServer, waitJob } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';

/** Every file under a folder, with its size and sha256. */
function filesUnder(dir: string): Array<{ path: string; size: number; sha256: string }> {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => {
      const content = readFileSync(path);
      return { path, size: content.length, sha256: createHash('sha256').update(content).digest('hex') };
    });
}

/** Writes the alfworld fixture's tiny model into the hub folder (fixture_smoke_alfworld.write_tiny_model); returns its id. */
function tinyModel(hub: string): string {
  const script = 'import sys; sys.path.insert(0, sys.argv[1]); import fixture_smoke_alfworld as f; print(f.write_tiny_model(sys.argv[2]))';
  const id = execFileSync(fullTierPython, ['-c', script, join(tasksRoot, 'hflm', 'tests'), hub], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return id.trim().split('\n').at(-1)!;
}

/** Walks the sandbox's whole file tree: files of an evaluation game's size and hash, and folders named as one. */
const scanScript = `
import hashlib, json, os, sys
spec = json.load(open(sys.argv[1]))
hashes, sizes, names = set(spec["hashes"]), set(spec["sizes"]), set(spec["names"])
found = {"hash": [], "name": [], "scanned": 0}
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    found["name"] += [os.path.join(root, d) for d in dirs if d in names]
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        found["scanned"] += 1
        try:
            if os.path.getsize(path) in sizes and hashlib.sha256(open(path, "rb").read()).hexdigest() in hashes:
                found["hash"].append(path)
        except OSError:
            pass
print(json.dumps(found))
`;

// The alfworld task's hidden games (valid_unseen, both halves) never enter the agent's sandbox: not through
// list_files or read_file, not through exec walking the whole tree, not by their host path; the train games do, and
// the env steps them there.
describe('alfworld: the agent cannot read the evaluation games', () => {
  let home: string;
  let client: Client;
  let evalDir: string;

  beforeAll(async () => {
    home = tempDir('alfworld-redteam');
    const hub = writeFixtureHub();
    // A tiny base that knows the games' words and answers "look" at once: a random one writes 100 tokens a step.
    const modelId = tinyModel(hub);
    const prepared = spawnSync('node', [cliEntry, '--home', home, 'prepare', 'alfworld', '--from', hub, '--model', modelId], {
      encoding: 'utf8',
    });
    expect(prepared.status, prepared.stderr).toBe(0);
    evalDir = join(home, 'assets', 'alfworld', 'eval');
    client = await startServer({ home, task: 'alfworld', serverArgs: ['--base-model', modelId, '--sandbox', 'bwrap'] });
  }, 300_000);

  afterAll(async () => {
    await client?.close();
  });

  it('list_files shows the train games and no evaluation game; read_file refuses their paths', async () => {
    const listed = await call(client, 'list_files', { path: 'data', depth: 6 });
    expect(listed.isError, listed.text).toBe(false);
    const paths = (listed.structured.entries as Array<{ path: string }>).map((e) => e.path);
    expect(paths.some((p) => p.includes('json_2.1.1/train/'))).toBe(true);
    expect(paths.filter((p) => p.includes('valid_unseen'))).toEqual([]);
    const root = await call(client, 'list_files', { path: '.', depth: 2 });
    expect((root.structured.entries as Array<{ path: string }>).filter((e) => e.path.includes('eval'))).toEqual([]);
    for (const path of [join(evalDir, 'public.jsonl'), '../eval/public.jsonl', 'data/../../eval/private.jsonl']) {
      const read = await call(client, 'read_file', { path });
      expect(read.isError, path).toBe(true);
    }
  });

  it('exec finds no evaluation game file by content or folder name anywhere in the sandbox, nor by its host path', async () => {
    const secrets = filesUnder(evalDir);
    const names = new Set(
      secrets.filter((f) => f.path.endsWith('game.tw-pddl')).flatMap((f) => relative(evalDir, f.path).split('/').slice(-3, -1)),
    );
    const spec = { hashes: secrets.map((f) => f.sha256), sizes: secrets.map((f) => f.size), names: [...names] };
    await call(client, 'write_file', { path: 'code/spec.json', content: JSON.stringify(spec) });
    await call(client, 'write_file', { path: 'code/scan.py', content: scanScript });
    // A job, not an exec: walking the runtime's many files can take longer than an exec's 45 s on a busy host.
    const scan = await call(client, 'run_training', { command: 'python3 code/scan.py code/spec.json > code/found.json' });
    expect((await waitJob(client, scan.structured.job_id as string)).state).toBe('succeeded');
    const found = JSON.parse((await call(client, 'read_file', { path: 'code/found.json' })).structured.content as string);
    expect(found.scanned).toBeGreaterThan(100);
    // react_prompts.json is in both data/ and eval/ (the agent's prompt is the grader's): it is not a secret.
    expect(found.hash.filter((p: string) => !p.endsWith('react_prompts.json'))).toEqual([]);
    expect(found.name).toEqual([]);
    const byPath = await call(client, 'exec', { command: `ls ${evalDir} || echo unreachable` });
    expect(byPath.structured.output).toContain('unreachable');
  });

  it('the brief names the stand-in; launch_rollouts plays train games in the sandbox with a checkpoint', async () => {
    const brief = await call(client, 'read_instructions');
    expect(brief.text).toContain('`lib/alfworld/` | a stand-in for the upstream `alfworld` package');
    const rollouts = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2, group_size: 2 });
    expect(rollouts.isError, rollouts.text).toBe(false);
    const batch = await waitJob(client, rollouts.structured.job_id as string);
    expect(batch.state, JSON.stringify(batch)).toBe('succeeded');
    expect(batch.result).toMatchObject({ episodes: 2, mean_reward: 0 });
    const episode = JSON.parse(
      (await call(client, 'read_file', { path: rollouts.structured.out as string })).structured.content.split('\n')[0],
    );
    expect(episode).toMatchObject({ group: 0, steps: 50, won: false, reward: 0 });
    expect(episode.gamefile).toMatch(/^alfworld\/json_2\.1\.1\/train\//);
  });

  it('the env steps the train games in the sandbox and finds no evaluation game there', async () => {
    const command = [
      'python3 -c "',
      'from hflm import alfworld',
      "env, n = alfworld.open_games('data/alfworld', 'train'); obs, infos = env.reset()",
      "print('train games', n, sorted(infos))",
      "try: alfworld.open_games('data/alfworld', 'eval_out_of_distribution')",
      "except ValueError as e: print('eval:', e)",
      '"',
    ].join('\n');
    const stepped = await call(client, 'exec', { command });
    expect(stepped.structured.exit_code, stepped.structured.output).toBe(0);
    expect(stepped.structured.output).toMatch(/train games 8 \['admissible_commands', 'extra.expert_plan', 'extra.gamefile', 'won'\]/);
    expect(stepped.structured.output).toContain('eval: data/alfworld holds no eval_out_of_distribution games');
  });
});
