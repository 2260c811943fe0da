import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { call, startServer, waitJob } from '../helpers/mcp.js';
import { filesUnder, prepareWithTinyModel, scanSandbox } from './hidden-eval.js';

// The alfworld task's hidden games (valid_unseen, both halves) never enter the agent's sandbox: not through
// list_files or read_file, not through exec walking the whole tree, not by their host path; the train games do, and
// the env steps them there.
describe('alfworld: the agent cannot read the evaluation games', () => {
  let home: string;
  let client: Client;
  let evalDir: string;

  beforeAll(async () => {
    // A tiny base that knows the games' words and answers "look" at once.
    const prepared = prepareWithTinyModel('alfworld');
    ({ home, evalDir } = prepared);
    client = await startServer({ home, task: 'alfworld', serverArgs: ['--base-model', prepared.modelId, '--sandbox', 'bwrap'] });
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
    const found = await scanSandbox(client, {
      hashes: secrets.map((f) => f.sha256),
      sizes: secrets.map((f) => f.size),
      names: [...names],
    });
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
