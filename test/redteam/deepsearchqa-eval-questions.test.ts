import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Store } from '../../src/store/store.js';
import { startDeepsearchqaServices } from '../helpers/deepsearchqa-services.js';
import { prepareDocker } from '../helpers/docker.js';
import { call, settledBaseline, startServer, waitJob } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import { filesUnder, hiddenRows, prepareWithTinyModel, scanSandbox, smokeFixture } from './hidden-eval.js';

/** A search corpus of the fixture's default profile, alone in a new folder; returns its path. */
function writeCorpus(): string {
  const corpus = join(tempDir('deepsearchqa-corpus'), 'corpus.jsonl');
  smokeFixture('deepsearchqa', 'f.write_corpus(sys.argv[2], "default")', corpus);
  return corpus;
}

// The deepsearchqa task's hidden questions (both halves) never enter the agent's sandbox, nor does its search provider
// (here a local corpus, the server's): the sandbox searches only through its channel, counted; the grader searches
// through a channel of its own, recorded and counted against nothing.
describe('deepsearchqa: the agent cannot read the evaluation questions nor reach the provider', () => {
  let home: string;
  let client: Client;
  let evalDir: string;
  let corpus: string;
  let services: Awaited<ReturnType<typeof startDeepsearchqaServices>>;
  let evalQuestions: string[];
  // Before the fixture writes the questions: the scan looks for them in every file changed since (with a second's slack).
  const questionsWritten = Date.now() / 1000 - 1;

  beforeAll(async () => {
    // A tiny base that answers every question at once and stops.
    const prepared = prepareWithTinyModel('deepsearchqa');
    ({ home, evalDir } = prepared);
    corpus = writeCorpus();
    evalQuestions = hiddenRows(evalDir, 'question');
    services = await startDeepsearchqaServices(corpus, 'answer-judge');
    client = await startServer({
      home,
      task: 'deepsearchqa',
      budget: 'searches=50',
      serverArgs: ['--base-model', prepared.modelId, '--sandbox', 'bwrap', ...services.serverArgs],
    });
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await services?.close();
  });

  it('list_files shows the train questions and no evaluation file; read_file refuses their paths', async () => {
    const listed = await call(client, 'list_files', { path: '.', depth: 3 });
    expect(listed.isError, listed.text).toBe(false);
    const paths = (listed.structured.entries as Array<{ path: string }>).map((e) => e.path);
    expect(paths).toContain('data/train.jsonl');
    expect(paths.filter((p) => /(public|private)\.jsonl$|^eval/.test(p))).toEqual([]);
    for (const path of [join(evalDir, 'public.jsonl'), '../eval/public.jsonl', 'data/../../eval/private.jsonl', corpus]) {
      expect((await call(client, 'read_file', { path })).isError, path).toBe(true);
    }
  });

  it('exec finds no evaluation question, no file of the hidden set and no corpus file anywhere in the sandbox', async () => {
    const secrets = [...filesUnder(evalDir), ...filesUnder(join(corpus, '..'))];
    const found = await scanSandbox(client, {
      hashes: secrets.map((f) => f.sha256),
      sizes: secrets.map((f) => f.size),
      texts: { values: evalQuestions, changedSince: questionsWritten },
    });
    expect(found.scanned).toBeGreaterThan(100);
    expect(found.hash).toEqual([]);
    // The spec itself holds the questions: it is the only file that may, and finding it shows the text search ran.
    expect(found.text).toEqual(['/workspace/code/spec.json']);
    const byPath = await call(client, 'exec', { command: `ls ${evalDir} ${corpus} 2>&1 || echo unreachable` });
    expect(byPath.structured.output).toContain('unreachable');
  });

  it("launch_rollouts plays train questions searching through the channel, each query the run's; the baseline searched through its own", async () => {
    const before = (await call(client, 'budget_status')).structured.search_queries.used as number;
    const rollouts = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2, group_size: 2, temperature: 0 });
    expect(rollouts.isError, rollouts.text).toBe(false);
    const batch = await waitJob(client, rollouts.structured.job_id as string);
    expect(batch.state, JSON.stringify(batch)).toBe('succeeded');
    expect(batch.result).toMatchObject({ episodes: 2, mean_reward: 0 });
    const episode = JSON.parse(
      (await call(client, 'read_file', { path: rollouts.structured.out as string })).structured.content.split('\n')[0],
    );
    // The tiny base searches for Ann's city, then answers "nothing".
    expect(episode).toMatchObject({ group: 0, ended: 'answer', predicted: 'nothing', reward: 0, steps: 2, searches: ['city of Ann'] });
    expect(episode.segments[1][0]).toMatch(/^\nObservation: Ann's city is \w+\. \| Ann's pet is \w+\./);
    const searched = await call(client, 'exec', {
      command: 'python3 -c "from a2rl_search import observation; print(observation(\'about Ben\'))"',
    });
    expect(searched.structured.output).toMatch(/^Ben's city is \w+\. \| Ben's pet is/);
    expect((await call(client, 'budget_status')).structured.search_queries.used).toBe(before + 3);

    const baseline = await settledBaseline(client);
    expect(baseline.state, JSON.stringify(baseline)).toBe('graded');
    expect(baseline.score).toBe(0);
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const runId = store.listActiveRuns()[0]!.id;
      const events = store.db.prepare("SELECT name, data FROM events WHERE run_id = ? AND kind = 'search'").all(runId) as Array<{
        name: string;
        data: string;
      }>;
      // The run's queries are its own (rollouts and exec); the grading's, one per question, are recorded apart and count for nothing.
      expect(events.filter((e) => e.name === 'query')).toHaveLength(before + 3);
      const grading = events.filter((e) => e.name === 'grading_query').map((e) => JSON.parse(e.data));
      expect(grading).toHaveLength(8);
      const grade = store.db.prepare("SELECT details FROM grades WHERE task_id = 'deepsearchqa'").get() as { details: string };
      expect(JSON.parse(grade.details).private).toMatchObject({ score: 0, total: 4, string_matched: 0, whole_total: 8 });
      expect(new Set(grading.map((e) => e.query))).toEqual(new Set(['city of Ann']));
      expect((await call(client, 'budget_status')).structured.search_queries.used).toBe(before + 3);
    } finally {
      store.close();
    }
  });
});

const dockerUnavailable = await prepareDocker();

// The same channels from Docker's containers: the run's (a rollouts batch in the run's container) and a grading's own.
describe.skipIf(dockerUnavailable)(
  `deepsearchqa on Docker: rollouts and the baseline grading search through their channels${dockerUnavailable ? ` (skipped: ${dockerUnavailable})` : ''}`,
  () => {
    it('plays a rollouts batch and grades the baseline, each searching through its own socket', { timeout: 600_000 }, async () => {
      const { home, modelId } = prepareWithTinyModel('deepsearchqa', 'deepsearchqa-docker');
      const services = await startDeepsearchqaServices(writeCorpus(), 'answer-judge');
      const client = await startServer({
        home,
        task: 'deepsearchqa',
        budget: 'searches=10',
        serverArgs: ['--base-model', modelId, '--sandbox', 'docker', ...services.serverArgs],
      });
      try {
        const rollouts = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 2, group_size: 2, temperature: 0 });
        expect(rollouts.isError, rollouts.text).toBe(false);
        const batch = await waitJob(client, rollouts.structured.job_id as string);
        expect(batch.state, JSON.stringify(batch)).toBe('succeeded');
        const episode = JSON.parse(
          (await call(client, 'read_file', { path: rollouts.structured.out as string })).structured.content.split('\n')[0],
        );
        expect(episode.segments[1][0]).toMatch(/^\nObservation: Ann's city is \w+\. \| Ann's pet is \w+\./);
        expect((await call(client, 'budget_status')).structured.search_queries.used).toBe(2);
        const baseline = await settledBaseline(client);
        expect(baseline.state, JSON.stringify(baseline)).toBe('graded');
        expect(baseline.score).toBe(0);
        expect((await call(client, 'budget_status')).structured.search_queries.used).toBe(2);
      } finally {
        await client.close();
        await services.close();
      }
      const store = new Store(join(home, 'store.sqlite'));
      try {
        const names = (store.db.prepare("SELECT name FROM events WHERE kind = 'search'").all() as Array<{ name: string }>).map(
          (e) => e.name,
        );
        expect(names.filter((n) => n === 'grading_query')).toHaveLength(8);
        expect(names.filter((n) => n === 'query')).toHaveLength(2);
      } finally {
        store.close();
      }
    });
  },
);
