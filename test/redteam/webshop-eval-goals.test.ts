import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { call, startServer, waitJob } from '../helpers/mcp.js';
import { filesUnder, hiddenRows, prepareWithTinyModel, scanSandbox, sha256 } from './hidden-eval.js';

// The webshop task's hidden goals (the reference's 100, both halves) never enter the agent's sandbox: not through
// list_files or read_file, not through exec walking the whole tree (the hidden files by content, the goals' instructions
// in any workspace file), not by their host path; the train goals' env is there, and the agent's code steps it.
describe('webshop: the agent cannot read the evaluation goals', () => {
  let home: string;
  let client: Client;
  let evalDir: string;
  let evalTexts: string[];

  beforeAll(async () => {
    // A tiny base that knows the shop's words and buys one product in three steps.
    const prepared = prepareWithTinyModel('webshop');
    ({ home, evalDir } = prepared);
    evalTexts = hiddenRows(evalDir, 'instruction_text');
    client = await startServer({ home, task: 'webshop', serverArgs: ['--base-model', prepared.modelId, '--sandbox', 'bwrap'] });
  }, 300_000);

  afterAll(async () => {
    await client?.close();
  });

  it('list_files shows the train root and no evaluation file; read_file refuses their paths', async () => {
    const listed = await call(client, 'list_files', { path: 'data', depth: 4 });
    expect(listed.isError, listed.text).toBe(false);
    const paths = (listed.structured.entries as Array<{ path: string }>).map((e) => e.path);
    expect(paths).toContain('data/webshop/data/items_ins_v2_1000.json');
    expect(paths.filter((p) => /public|private/.test(p))).toEqual([]);
    const root = await call(client, 'list_files', { path: '.', depth: 2 });
    expect((root.structured.entries as Array<{ path: string }>).filter((e) => e.path.includes('eval'))).toEqual([]);
    for (const path of [join(evalDir, 'public.jsonl'), '../eval/public.jsonl', 'data/../../eval/webshop/data/items_ins_v2_1000.json']) {
      const read = await call(client, 'read_file', { path });
      expect(read.isError, path).toBe(true);
    }
  });

  it('exec finds no hidden file by content anywhere in the sandbox, no evaluation instruction in the workspace, nor the host path', async () => {
    // The product file and the index documents are the same in both roots (the shop is shared): not secrets.
    const secrets = filesUnder(evalDir).filter((f) => !/items_shuffle_1000\.json$|documents\.jsonl$/.test(f.path));
    expect(secrets.map((f) => f.path.slice(evalDir.length + 1)).sort()).toEqual([
      'private.jsonl',
      'public.jsonl',
      'webshop/data/items_human_ins.json',
      'webshop/data/items_ins_v2_1000.json',
    ]);
    // Controls that the scan finds what it looks for: the shared product file, and a train goal's instruction.
    const products = filesUnder(evalDir).find((f) => f.path.endsWith('items_shuffle_1000.json'))!;
    const trainText = JSON.parse(readFileSync(join(evalDir, '..', 'data', 'train.jsonl'), 'utf8').split('\n')[0]!).instruction_text;
    const found = await scanSandbox(client, {
      hashes: [...secrets, products].map((f) => f.sha256),
      sizes: [...secrets, products].map((f) => f.size),
      textHashes: [...evalTexts, trainText].map((t) => sha256(t)),
    });
    expect(found.scanned).toBeGreaterThan(100);
    expect(found.hash).toEqual(['/workspace/data/webshop/data/items_shuffle_1000.json']);
    expect(found.text).toEqual(['/workspace/data/train.jsonl']);
    const byPath = await call(client, 'exec', { command: `ls ${evalDir} || echo unreachable` });
    expect(byPath.structured.output).toContain('unreachable');
  });

  it('the brief names the stand-in; launch_rollouts plays train goals in the sandbox with a checkpoint', async () => {
    const brief = await call(client, 'read_instructions');
    expect(brief.text).toContain('`lib/web_agent_site/` | a stand-in for the upstream `web_agent_site` package');
    const rollouts = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2, group_size: 2 });
    expect(rollouts.isError, rollouts.text).toBe(false);
    const batch = await waitJob(client, rollouts.structured.job_id as string);
    expect(batch.state, JSON.stringify(batch)).toBe('succeeded');
    expect(batch.result).toMatchObject({ episodes: 2 });
    const episode = JSON.parse(
      (await call(client, 'read_file', { path: rollouts.structured.out as string })).structured.content.split('\n')[0],
    );
    expect(episode).toMatchObject({ group: 0, steps: 3, done: true, actions: ['search[wool coat]', expect.any(String), 'click[buy now]'] });
    expect(evalTexts).not.toContain(episode.instruction.replace(/^Instruction: /, ''));
  });

  it("the agent's code steps the env over the train root, whose goals are the train rows and none of the evaluation's", async () => {
    // The evaluation's instructions reach the sandbox as hashes only, to be compared with the env's goals there.
    await call(client, 'write_file', { path: 'code/eval-hashes.json', content: JSON.stringify(evalTexts.map((t) => sha256(t))) });
    const command = [
      'python3 -c "',
      'import hashlib, json',
      'from hflm import webshop',
      "env = webshop.open_server('data/webshop', webshop.VARIANTS['webshop'])",
      "rows = [json.loads(line) for line in open('data/train.jsonl')]",
      "texts = [g['instruction_text'] for g in env.server.goals]",
      "hidden = set(json.load(open('code/eval-hashes.json')))",
      "obs, _ = env.reset(session=0); obs, reward, done, _ = env.step('search[wool coat]')",
      "print('goals', len(texts), texts == [r['instruction_text'] for r in rows], reward, done)",
      "print('evaluation goals among them', sum(hashlib.sha256(t.encode()).hexdigest() in hidden for t in texts))",
      '"',
    ].join('\n');
    const stepped = await call(client, 'exec', { command });
    expect(stepped.structured.exit_code, stepped.structured.output).toBe(0);
    expect(stepped.structured.output).toMatch(/goals \d+ True 0\.0 False/);
    expect(stepped.structured.output).toContain('evaluation goals among them 0');
  });
});
