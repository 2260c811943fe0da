import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerBackend } from '../sandbox/docker.js';
import { Engine } from '../src/core/engine.js';
import { LlmJudge, readAnswerVerdict } from '../src/grading/judge/llm.js';
import { answersKind } from '../src/grading/kinds/answers.js';
import { SearchCache } from '../src/search/cache.js';
import { searchCacheFile, searchClientLibrary, SearchService } from '../src/search/service.js';
import { createSearchProvider } from '../src/search/providers/index.js';
import { maxWaiting } from '../src/search/providers/local.js';
import { Store } from '../src/store/store.js';
import { budgetReport, formatBudget, parseBudget } from '../src/tasks/budget.js';
import { prepareDocker } from './helpers/docker.js';
import { startFakeLlm } from './helpers/fake-llm.js';
import { type FakeProvider, startFakeProvider } from './helpers/fake-search.js';
import { type InProcessRun, startInProcess } from './helpers/in-process.js';
import { call } from './helpers/mcp.js';
import { liveOwner, tempDir } from './helpers/sandbox.js';

const apiKey = 'serpapi-test-key';
/** One home for every served run: the base model's baseline, graded when the first run is served, is then cached for all. */
const home = tempDir('search-home');
const signal = () => AbortSignal.timeout(10_000);

/** A Python one-liner run by the exec tool in the run's sandbox: it searches through the channel and prints JSON. */
function searchCommand(query: string, topK = 3): string {
  const script = [
    'import json, sys',
    'from a2rl_search import search, SearchError',
    'try:',
    `    print(json.dumps({"results": search(${JSON.stringify(query)}, ${topK})}))`,
    'except SearchError as error:',
    '    print(json.dumps({"error": str(error), "status": error.status}))',
  ].join('\n');
  return `python3 -c '${script}'`;
}

async function searchFromSandbox(
  served: InProcessRun,
  query: string,
  topK = 3,
): Promise<{ results?: any[]; error?: string; status?: number }> {
  const result = await call(served.client, 'exec', { command: searchCommand(query, topK) });
  expect(result.structured.exit_code, result.structured.output).toBe(0);
  return JSON.parse(result.structured.output.trim().split('\n').pop()!);
}

function searchEvents(home: string, runId: string): Array<{ name: string; data: any }> {
  const store = new Store(join(home, 'store.sqlite'));
  try {
    const rows = store.db.prepare("SELECT name, data FROM events WHERE run_id = ? AND kind = 'search' ORDER BY id").all(runId) as Array<{
      name: string;
      data: string;
    }>;
    return rows.map((row) => ({ name: row.name, data: JSON.parse(row.data) }));
  } finally {
    store.close();
  }
}

describe('the search budget', () => {
  const defaults = { wallSeconds: 60, computeSeconds: 60, submissions: 1, rolloutEpisodes: 1 };

  it('reads searches=N (0 takes a channel away) and refuses what is not a whole number', () => {
    expect(parseBudget('searches=40', defaults)).toEqual({ ...defaults, searchQueries: 40 });
    expect(parseBudget('searches=0', { ...defaults, searchQueries: 10 }).searchQueries).toBe(0);
    expect(() => parseBudget('searches=1.5', defaults)).toThrow(/"searches=1.5" must be a whole number, 0 or more/);
    expect(() => parseBudget('searches=2m', defaults)).toThrow(/is a count; write searches=2 without a unit/);
  });

  it('reports search queries only for a run that may search, and names them when they run out', () => {
    const usage = { computeSeconds: 0, submissions: 0, rolloutEpisodes: 0 };
    expect(budgetReport(defaults, usage, 1).search_queries).toBeUndefined();
    expect(budgetReport(defaults, usage, 1).exhausted).not.toContain('search_queries');
    const limits = { ...defaults, searchQueries: 3 };
    expect(budgetReport(limits, usage, 1, 2).search_queries).toEqual({ used: 2, limit: 3, left: 1 });
    expect(budgetReport(limits, usage, 1, 3).exhausted).toContain('search_queries');
    expect(formatBudget(limits)).toMatch(/, searches=3$/);
    expect(formatBudget(defaults)).not.toContain('searches');
  });
});

describe('search providers', () => {
  let serpapi: FakeProvider;
  let duckduckgo: FakeProvider;
  beforeAll(async () => {
    serpapi = await startFakeProvider('serpapi', { apiKey });
    duckduckgo = await startFakeProvider('duckduckgo');
  });
  afterAll(async () => {
    await serpapi.close();
    await duckduckgo.close();
  });

  it("serpapi: asks with q, num and the key, and maps the organic results' title, snippet and link", async () => {
    const provider = createSearchProvider({ provider: 'serpapi', apiKey, url: serpapi.url });
    const results = await provider.search('alan turing', 3, signal());
    expect(results).toEqual(
      [1, 2, 3].map((i) => ({
        title: `alan turing — result ${i}`,
        snippet: `snippet ${i} about alan turing`,
        url: `https://example.org/alan%20turing/${i}`,
      })),
    );
    expect(serpapi.requests.at(-1)!.params).toMatchObject({ q: 'alan turing', num: '3', api_key: apiKey });
    // The key is not part of what results are cached under.
    expect(provider.cacheId).not.toContain(apiKey);
  });

  it('duckduckgo: the abstract first, then related topics with text; topic groups skipped', async () => {
    const provider = createSearchProvider({ provider: 'duckduckgo', url: duckduckgo.url });
    const results = await provider.search('ada lovelace', 3, signal());
    expect(results.map((r) => r.snippet)).toEqual([
      'abstract about ada lovelace',
      'ada lovelace topic one - first related topic',
      'ada lovelace topic two - second related topic',
    ]);
    expect(results[1]).toMatchObject({ title: 'ada lovelace topic one', url: 'https://duckduckgo.com/one' });
    expect(duckduckgo.requests.at(-1)!.params).toMatchObject({ q: 'ada lovelace', format: 'json', no_html: '1' });
  });

  it('local: BM25 ranks the document about the query first, in a worker thread; the corpus is part of the cache id', async () => {
    const dir = tempDir('corpus');
    const corpus = join(dir, 'corpus.jsonl');
    const docs = [
      { title: 'Paris', text: 'Paris is the capital and largest city of France.', url: 'https://example.org/paris' },
      { title: 'Berlin', text: 'Berlin is the capital of Germany. It is a city of museums.', url: 'https://example.org/berlin' },
      { title: 'Cheese', text: 'France makes many cheeses; cheese is made from milk.', url: 'https://example.org/cheese' },
    ];
    writeFileSync(corpus, docs.map((doc) => JSON.stringify(doc)).join('\n'));
    const provider = createSearchProvider({ provider: 'local', corpus });
    expect((await provider.search('capital of France', 2, signal())).map((r) => r.title)).toEqual(['Paris', 'Berlin']);
    expect((await provider.search('cheese milk', 3, signal())).map((r) => r.title)).toEqual(['Cheese']);
    expect(await provider.search('zzz', 3, signal())).toEqual([]);
    // The index lives in a worker: once stopped (or dead), the next query starts another.
    await provider.close!();
    await expect(provider.search('capital of France', 1, signal())).resolves.toHaveLength(1);
    // Past maxWaiting queries waiting at once, the next is refused at once; those admitted are all answered.
    const burst = Array.from({ length: maxWaiting + 1 }, () => provider.search('capital of France', 1, signal()));
    await expect(burst.at(-1)).rejects.toThrow(`local search is busy: ${maxWaiting} queries wait on it already`);
    expect((await Promise.all(burst.slice(0, -1))).map((results) => results[0]!.title)).toEqual(Array(maxWaiting).fill('Paris'));
    await provider.close!();
    writeFileSync(
      corpus,
      docs
        .slice(0, 2)
        .map((doc) => JSON.stringify(doc))
        .join('\n'),
    );
    const changed = createSearchProvider({ provider: 'local', corpus });
    expect(changed.cacheId).not.toBe(provider.cacheId);
    // A corpus changed on disk after the server checked it is refused, not silently ranked under the old cache id.
    await changed.close!();
    writeFileSync(corpus, JSON.stringify(docs[2]));
    await expect(changed.search('cheese', 1, signal())).rejects.toThrow(/the local corpus changed since the server started/);
    await changed.close!();
    writeFileSync(corpus, `${JSON.stringify(docs[0])}\n{"title": 3}\n`);
    expect(() => createSearchProvider({ provider: 'local', corpus })).toThrow(/Line 2 of the search corpus .* is not a JSON object/);
  });

  it.each([
    [{ provider: 'bing' }, /Unknown search provider "bing"; known: serpapi, duckduckgo, local/],
    [{ provider: 'serpapi', keyEnv: 'MY_SERPAPI_KEY' }, /needs an API key in the environment variable MY_SERPAPI_KEY/],
    [{ provider: 'serpapi', apiKey, corpus: '/tmp/c.jsonl' }, /--search-corpus is for --search local; drop it/],
    [{ provider: 'local', corpus: '/tmp/c.jsonl', url: 'http://x' }, /--search-url is for --search serpapi or duckduckgo/],
    [{ provider: 'local' }, /--search local needs --search-corpus FILE/],
    [{ provider: 'duckduckgo', url: 'ftp://x' }, /--search-url must be an http\(s\) URL/],
  ])('refuses settings that cannot work, saying what to do: %j', (settings, message) => {
    expect(() => createSearchProvider(settings)).toThrow(message);
  });

  it("a provider's failure names neither the request's URL nor the key, though its body echoes them", async () => {
    const provider = createSearchProvider({ provider: 'serpapi', apiKey, url: serpapi.url });
    serpapi.failWith = 500;
    try {
      const failure = await provider.search('x', 3, signal()).then(
        () => undefined,
        (error: Error) => error,
      );
      expect(failure?.message).toBe('serpapi answered HTTP 500');
    } finally {
      serpapi.failWith = undefined;
    }
    const unreachable = createSearchProvider({ provider: 'serpapi', apiKey, url: 'http://127.0.0.1:1/search' });
    await expect(unreachable.search('x', 3, signal())).rejects.toThrow(/^serpapi could not be reached$/);
  });
});

describe('the search channel, from a bubblewrap sandbox', () => {
  let provider: FakeProvider;
  let served: InProcessRun;
  beforeAll(async () => {
    provider = await startFakeProvider('serpapi', { apiKey });
    served = await startInProcess({
      home,
      budget: 'searches=3',
      engine: { search: { provider: 'serpapi', apiKey, url: provider.url } },
    });
    // Graded once here, the baseline is cached for the other servers these tests start on the same home.
    await served.engine.gradeBaseline(served.run);
  });
  afterAll(async () => {
    await served?.close();
    await provider.close();
  });

  it('answers a query through the socket, answers it again from the cache without calling the provider, and counts both', async () => {
    const first = await searchFromSandbox(served, 'who wrote hamlet');
    expect(first.results!.map((r) => r.snippet)).toEqual([1, 2, 3].map((i) => `snippet ${i} about who wrote hamlet`));
    expect(provider.requests).toHaveLength(1);
    const again = await searchFromSandbox(served, '  who   wrote hamlet ');
    expect(again.results).toEqual(first.results);
    expect(provider.requests).toHaveLength(1);
    const budget = await call(served.client, 'budget_status');
    expect(budget.structured.search_queries).toEqual({ used: 2, limit: 3, left: 1 });
    // The brief says the run may search, how, and how much.
    expect((await call(served.client, 'read_instructions')).text).toMatch(/\| search queries \| 3 \| .*from a2rl_search import search/);
    expect(budget.text).toContain('search queries: 2 of 3');
    expect(searchEvents(home, served.run.id).map((e) => [e.name, e.data.query, e.data.cached])).toEqual([
      ['query', 'who wrote hamlet', false],
      ['query', 'who wrote hamlet', true],
    ]);
  });

  it("does not count a provider's failure, records it, and tells the sandbox to try again", async () => {
    provider.failWith = 503;
    try {
      const failed = await searchFromSandbox(served, 'a query that fails');
      expect(failed.status).toBe(502);
      expect(failed.error).toMatch(/^\[UNAVAILABLE\] The search provider failed \(serpapi answered HTTP 503\); nothing was counted/);
    } finally {
      provider.failWith = undefined;
    }
    expect((await call(served.client, 'budget_status')).structured.search_queries.used).toBe(2);
    expect(searchEvents(home, served.run.id).at(-1)).toMatchObject({ name: 'failed', data: { query: 'a query that fails' } });
  });

  it('refuses a query past the budget with a clear message, calling nothing', async () => {
    expect((await searchFromSandbox(served, 'capital of peru', 1)).results).toHaveLength(1);
    const requests = provider.requests.length;
    const refused = await searchFromSandbox(served, 'capital of chile');
    expect(refused.status).toBe(429);
    expect(refused.error).toMatch(/^\[BUDGET_EXHAUSTED\] All 3 search queries of this run's budget are used/);
    // Even a query the cache holds is refused: what a run may ask does not depend on what others asked before.
    expect((await searchFromSandbox(served, 'who wrote hamlet')).error).toMatch(/BUDGET_EXHAUSTED/);
    expect(provider.requests).toHaveLength(requests);
    const budget = await call(served.client, 'budget_status');
    expect(budget.structured.search_queries).toEqual({ used: 3, limit: 3, left: 0 });
    expect(budget.structured.exhausted).toContain('search_queries');
    expect(searchEvents(home, served.run.id).filter((e) => e.name === 'query')).toHaveLength(3);
    // A server that adopts the run goes on from what it asked before: the count is the run's recorded queries.
    const reopened = await served.engine.search!.open(
      { id: served.run.id, dir: tempDir('search-reopen'), limit: 3, record: () => undefined },
      served.engine.store,
    );
    try {
      expect(reopened.used).toBe(3);
    } finally {
      await reopened.close();
    }
  });

  it("keeps each run's answers to itself: another run asks the provider again, and its own repeat is cached", async () => {
    // Another server on the same home, with its own run: a shared answer would come back faster (and say cached),
    // telling this run what the other asked.
    const second = await startInProcess({
      home,
      budget: 'searches=2',
      engine: { search: { provider: 'serpapi', apiKey, url: provider.url } },
    });
    try {
      const requests = provider.requests.length;
      expect((await searchFromSandbox(second, 'who wrote hamlet')).results).toHaveLength(3);
      expect(provider.requests).toHaveLength(requests + 1);
      expect((await searchFromSandbox(second, 'who wrote hamlet')).results).toHaveLength(3);
      expect(provider.requests).toHaveLength(requests + 1);
      expect(searchEvents(home, second.run.id).map((e) => e.data.cached)).toEqual([false, true]);
      // The cache is the home's, not the process's: the first run's answers are kept there for it.
      const cache = new SearchCache(join(home, searchCacheFile));
      try {
        expect(cache.get(`serpapi@${provider.url}`, served.run.id, 'who wrote hamlet', 3)).toHaveLength(3);
      } finally {
        cache.close();
      }
    } finally {
      await second.close();
    }
  });
});

describe('runs without search', () => {
  it('a run whose budget has no searches gets no channel and no client', async () => {
    const served = await startInProcess({
      home,
      engine: { search: { provider: 'duckduckgo', url: 'http://127.0.0.1:1/' } },
    });
    try {
      const result = await call(served.client, 'exec', { command: 'echo "socket=${A2RL_SEARCH_SOCKET:-none}"; ls /run/a2rl 2>&1; ls lib' });
      expect(result.structured.output).toContain('socket=none');
      expect(result.structured.output).toMatch(/No such file or directory/);
      expect(result.structured.output).not.toContain('a2rl_search');
      expect((await call(served.client, 'budget_status')).structured.search_queries).toBeUndefined();
    } finally {
      await served.close();
    }
  });

  it('a server without --search refuses a run that may search, writing nothing', async () => {
    const home = tempDir('search-refused');
    const engine = await Engine.open({ home, logger: pino({ level: 'silent' }) });
    try {
      await expect(engine.createRun({ taskId: 'micro-gsm8k', budget: 'searches=5' })).rejects.toThrow(
        /may make 5 search queries, but this server has no search provider: start it with --search serpapi, duckduckgo or local/,
      );
      expect(engine.store.listActiveRuns()).toEqual([]);
    } finally {
      await engine.close();
    }
  });
});

const dockerUnavailable = await prepareDocker();

describe.skipIf(dockerUnavailable)(
  `the search channel, from a Docker sandbox${dockerUnavailable ? ` (skipped: ${dockerUnavailable})` : ''}`,
  () => {
    it('answers the sandbox through the socket; the provider itself is out of reach', async () => {
      const provider = await startFakeProvider('duckduckgo');
      const served = await startInProcess({
        home,
        budget: 'searches=2',
        backend: new DockerBackend({ owner: liveOwner }),
        engine: { search: { provider: 'duckduckgo', url: provider.url } },
      });
      try {
        const found = await searchFromSandbox(served, 'grace hopper', 2);
        expect(found.results!.map((r) => r.snippet)).toEqual([
          'abstract about grace hopper',
          'grace hopper topic one - first related topic',
        ]);
        const port = new URL(provider.url).port;
        const direct = await call(served.client, 'exec', {
          command: `python3 -c 'import socket; socket.create_connection(("127.0.0.1", ${port}), timeout=3)' 2>&1 | tail -1`,
        });
        expect(direct.structured.output).toMatch(/Error/);
        expect(provider.requests).toHaveLength(1);
      } finally {
        await served.close();
        await provider.close();
      }
    });
  },
);

/**
 * Searches once through a channel's socket with the sandbox's own client, from this host (asynchronously: the channel
 * answers from this process); returns its JSON answer.
 */
async function searchThroughSocket(socketPath: string, query: string): Promise<{ results?: any[]; error?: string }> {
  const { stdout } = await promisify(execFile)('python3', ['-c', searchCommand(query).slice("python3 -c '".length, -1)], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: dirname(searchClientLibrary.source), A2RL_SEARCH_SOCKET: socketPath },
  });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

describe("a grading's own search channel (DeepSearchQA's grader searches)", () => {
  it("answers from the same provider and the gradings' own cache, records grading_query events, and counts against no budget", async () => {
    const provider = await startFakeProvider('serpapi', { apiKey });
    const serviceHome = tempDir('search-grading');
    const service = SearchService.create({ provider: 'serpapi', apiKey, url: provider.url }, serviceHome);
    const store = new Store(join(serviceHome, 'store.sqlite'));
    const recorded: Array<{ kind: string; name: string; data: any }> = [];
    try {
      const grading = await service.openForGrading({
        dir: join(serviceHome, 'grading', 'g1-search'),
        record: (kind, name, data) => recorded.push({ kind, name, data }),
      });
      const { mount, env } = grading.sandboxMount();
      expect(mount).toMatchObject({ target: '/run/a2rl/search', readOnly: true });
      expect(env).toEqual({ A2RL_SEARCH_SOCKET: '/run/a2rl/search/search.sock' });
      for (let i = 0; i < 3; i++) expect((await searchThroughSocket(grading.socketPath, 'who wrote hamlet')).results).toHaveLength(3);
      await grading.close();
      expect(provider.requests).toHaveLength(1);
      expect(recorded.map((e) => [e.kind, e.name, e.data.cached])).toEqual([
        ['search', 'grading_query', false],
        ['search', 'grading_query', true],
        ['search', 'grading_query', true],
      ]);
      // A run's channel is not answered from the gradings' cache (what a graded model asked stays the server's), and counts only its own queries.
      const runChannel = await service.open(
        { id: 'run-1', dir: tempDir('search-run'), limit: 2, record: (kind, name, data) => recorded.push({ kind, name, data }) },
        store,
      );
      runChannel.admitThrough({ searchRefusal: () => undefined });
      try {
        expect((await searchThroughSocket(runChannel.socketPath, 'who wrote hamlet')).results).toHaveLength(3);
        expect(runChannel.used).toBe(1);
        expect(recorded.at(-1)).toMatchObject({ kind: 'search', name: 'query', data: { cached: false } });
      } finally {
        await runChannel.close();
      }
      expect(provider.requests).toHaveLength(2);
      // What a task's grades depend on: the provider and its endpoint, never the key.
      expect(service.gradingVersion).toMatch(/^search:serpapi@[0-9a-f]{8}$/);
      expect(service.gradingVersion).not.toContain(apiKey);
    } finally {
      store.close();
      service.close();
      await provider.close();
    }
  });

  it("the answers kind: the LLM judge's binary verdict (the reference's prompt and reading), the grader's string match where the judge fails", async () => {
    const judgeHome = tempDir('answers-judge');
    const llm = await startFakeLlm((request) => {
      const prompt = request.body.messages.find((m) => m.role === 'user')!.content;
      const gold = /Gold answer: (.*)\n/.exec(prompt)![1]!;
      if (gold === 'Lima') return { status: 400 }; // the judge cannot be asked: the string match stands in
      if (gold === 'Oslo') return 'Correct.\nThe prediction names Oslo.';
      return 'incorrect';
    });
    const store = new Store(join(judgeHome, 'store.sqlite'));
    try {
      const outFile = join(judgeHome, 'items.jsonl');
      const item = (id: string, split: string, gold: string, predicted: string, stringMatch: boolean) =>
        JSON.stringify({ id, split, answer_type: 'Single Answer', gold, predicted, string_match: stringMatch, steps: 2 });
      writeFileSync(
        outFile,
        [
          item('a', 'public', 'Oslo', 'oslo', true),
          item('b', 'public', 'Rome', 'rome', true),
          item('c', 'private', 'Lima', 'Lima', true),
          item('d', 'private', 'Lima', 'Quito', false),
        ].join('\n') + '\n',
      );
      const judge = new LlmJudge(store, { baseUrl: llm.baseUrl, model: 'answer-judge', maxAttempts: 1 });
      const metrics = await answersKind.score({
        task: { id: 'deepsearchqa' } as never,
        outFile,
        outDir: judgeHome,
        backend: undefined as never,
        judge,
      });
      expect(metrics.public).toMatchObject({ score: 50, correct: 1, total: 2, string_matched: 0 });
      expect(metrics.private).toMatchObject({ score: 50, correct: 1, total: 2, string_matched: 2, whole_score: 50, whole_total: 4 });
      const asked = llm.requests[0]!.body;
      expect(asked.temperature).toBe(0.5);
      expect(asked.messages[0]).toEqual({ role: 'system', content: 'You are a strict answer evaluator.' });
      expect(asked.messages[1]!.content).toContain(
        'Question answer type: Single Answer\n        Gold answer: Oslo\n        Predicted answer: oslo\n',
      );
    } finally {
      store.close();
      await llm.close();
    }
  });

  it('reads a verdict as the reference does: the first line, stripped of punctuation, is "correct"', () => {
    expect(readAnswerVerdict('correct')).toBe(true);
    expect(readAnswerVerdict('  Correct!\nbecause')).toBe(true);
    expect(readAnswerVerdict('incorrect')).toBe(false);
    expect(readAnswerVerdict('The answer is correct')).toBe(false);
    expect(readAnswerVerdict('  \n')).toBeNull();
  });
});
