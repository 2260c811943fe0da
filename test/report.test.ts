import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analyzeRun, loadRunFacts } from '../src/reports/analysis.js';
import { SafeDir } from '../src/util/safe-fs.js';
import { codeSnapshotsOf, recordCodeSnapshot } from '../src/store/code-snapshots.js';
import { exportRun } from '../src/reports/export.js';
import { environmentOf } from '../src/grading/grader-version.js';
import { bootstrapCi, buildLeaderboard, leaderboardCsv, runResults, standardDeviation } from '../src/reports/leaderboard.js';
import { writeNarrative } from '../src/reports/narrative.js';
import { cliEntry } from '../src/util/paths.js';
import { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { startFakeLlm } from './helpers/fake-llm.js';
import { timelineLimits } from '../src/reports/timeline.js';
import { recordCheckVerdict } from './helpers/integrity.js';
import { tempDir } from './helpers/sandbox.js';

const task = getTask('micro-gsm8k');
const graderVersion = task.graderVersion;
const baseline = { public: 10, private: 12 };

interface SeedOptions {
  id: string;
  agent?: string;
  driverModel?: string;
  /** Scores of the graded submissions, in order; 'failed' for a failed grading. */
  submissions: Array<{ public: number; private: number } | 'failed'>;
}

/**
 * A finished run written into a real store the way the server writes it: run row, events
 * (through the recorder), jobs with logs, a rollout batch, code snapshots, submissions and grades.
 */
function seedRun(store: Store, home: string, options: SeedOptions): void {
  const createdAt = Date.now() - 600_000;
  const dir = join(home, 'runs', options.id);
  mkdirSync(join(dir, 'workspace', 'code'), { recursive: true });
  mkdirSync(join(dir, 'workspace', 'rollouts'), { recursive: true });
  store.insertRun({
    id: options.id,
    task_id: task.id,
    label: 'seeded',
    budget: JSON.stringify({ wallSeconds: 1200, computeSeconds: 1200, submissions: 5, rolloutEpisodes: 1000 }),
    dir,
    sandbox: 'bwrap',
    grader_version: graderVersion,
    owner: '0-0',
    created_at: createdAt,
  });
  store.setRunAgent(options.id, { agent: options.agent ?? null, driver_model: options.driverModel ?? null });
  recordCheckVerdict(store, options.id);
  let clock = createdAt;
  const record = (kind: string, name: string, data: unknown, advanceS = 10) => {
    clock += advanceS * 1000;
    store.insertEvent({ run_id: options.id, at: clock, t_rel_ms: clock - createdAt, kind, name, data: JSON.stringify(data) });
  };
  writeFileSync(
    join(dir, 'workspace', 'code', 'train.py'),
    '"""supervised fine-tuning"""\nparser.add_argument("--lr", type=float, default=2e-3)\n',
  );
  const job = store.insertJob(
    {
      run_id: options.id,
      kind: 'training',
      command: 'python3 code/train.py',
      resources: '{}',
      charged: 1,
      episodes_requested: 0,
      owner: '0-0',
      created_at: clock,
    },
    join(dir, 'logs'),
  );
  mkdirSync(join(dir, 'logs'), { recursive: true });
  writeFileSync(job.log_path, 'step 1/10 loss 2.0\nsaved\n');
  // The agent's call that started it: a run with a tool call is a benchmark run (a health check has none).
  record('tool', 'run_training', { arguments: { command: job.command }, result: { job_id: `job-${job.id}` }, duration_ms: 5 }, 0);
  record('job', 'started', { job_id: job.id, kind: 'training', command: job.command, charged: true, log_path: job.log_path });
  recordCodeSnapshot(
    codeSnapshotsOf(home),
    () => SafeDir.openTrusted(join(dir, 'workspace', 'code')),
    (k, n, d) => record(k, n, d, 0),
    { job_id: job.id },
  );
  record('sample', 'resources', { job_id: job.id, cpu_s: 20, cpu_percent: 200, memory_bytes: 1e8 });
  store.finishJob(job.id, {
    state: 'succeeded',
    reason: null,
    exit_code: 0,
    signal: null,
    cpu_s: 60,
    gpu_s: 0,
    episodes_done: null,
    result: null,
    ended_at: clock + 30_000,
  });
  record(
    'job',
    'finished',
    { job_id: job.id, kind: 'training', state: 'succeeded', exit_code: 0, charged: true, cpu_s: 60, gpu_s: 0, episodes_done: null },
    30,
  );
  const rollouts = store.insertJob(
    {
      run_id: options.id,
      kind: 'rollouts',
      command: 'python3 -m micro_gsm8k.rollouts',
      resources: '{}',
      charged: 1,
      episodes_requested: 8,
      owner: '0-0',
      created_at: clock,
    },
    join(dir, 'logs'),
  );
  writeFileSync(rollouts.log_path, 'sampled\n');
  writeFileSync(join(dir, 'workspace', 'rollouts', 'batch-001.jsonl'), '{"prompt":"1+1","completion":"#### 2","reward":1}\n');
  record('job', 'started', { job_id: rollouts.id, kind: 'rollouts', command: rollouts.command, charged: true });
  store.finishJob(rollouts.id, {
    state: 'succeeded',
    reason: null,
    exit_code: 0,
    signal: null,
    cpu_s: 5,
    gpu_s: 0,
    episodes_done: 8,
    result: null,
    ended_at: clock + 5000,
  });
  record(
    'rollouts',
    'batch',
    { job_id: rollouts.id, episodes: 8, mean_reward: 1, out: 'rollouts/batch-001.jsonl', checkpoint: 'output/final' },
    5,
  );
  record(
    'job',
    'finished',
    { job_id: rollouts.id, kind: 'rollouts', state: 'succeeded', exit_code: 0, charged: true, cpu_s: 5, gpu_s: 0, episodes_done: 8 },
    0,
  );
  options.submissions.forEach((outcome, i) => {
    const hash = `${options.id}-checkpoint-${i}`;
    const inserted = store.insertSubmissionWithin(5, {
      run_id: options.id,
      path: 'output/final',
      note: null,
      content_hash: hash,
      files: 2,
      bytes: 10,
      created_at: clock + 10_000,
    });
    const submission = 'inserted' in inserted ? inserted.inserted : undefined;
    if (!submission) throw new Error('seeding failed');
    record('submission', 'queued', { submission_id: submission.id, path: 'output/final', content_hash: hash });
    if (outcome === 'failed') {
      store.setSubmissionState(submission.id, 'failed', 'grader crashed', clock + 5000);
      record('submission', 'failed', { submission_id: submission.id, error: 'grader crashed' }, 5);
    } else {
      store.insertGrade({
        task_id: task.id,
        grader_version: graderVersion,
        content_hash: hash,
        public_score: outcome.public,
        private_score: outcome.private,
        details: '{}',
        duration_ms: 1,
        created_at: clock,
      });
      store.setSubmissionState(submission.id, 'graded', null, clock + 5000);
      record('submission', 'graded', { submission_id: submission.id, public_score: outcome.public, private_score: outcome.private }, 5);
    }
  });
  store.endRun(options.id, 'the agent disconnected', clock + 1000);
  record('run', 'ended', { reason: 'the agent disconnected' }, 1);
}

function newStore(): { store: Store; home: string } {
  const home = tempDir('report');
  const store = new Store(join(home, 'store.sqlite'));
  store.insertGrade({
    task_id: task.id,
    grader_version: graderVersion,
    content_hash: task.baseModelHash,
    public_score: baseline.public,
    private_score: baseline.private,
    details: '{}',
    duration_ms: 1,
    created_at: 0,
  });
  return { store, home };
}

describe('run export and HTML report', () => {
  let browser: Awaited<ReturnType<typeof puppeteer.launch>>;
  beforeAll(async () => {
    browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('exports a self-contained folder whose report renders in Chromium with one point per graded submission and no console error', async () => {
    const { store, home } = newStore();
    seedRun(store, home, {
      id: 'run-a',
      submissions: [{ public: 30, private: 28 }, 'failed', { public: 25, private: 26 }, { public: 44, private: 40 }],
    });
    const out = join(home, 'export');
    const { analysis } = exportRun(store, 'run-a', out);
    store.close();

    for (const file of [
      'run.json',
      'events.jsonl',
      'jobs.json',
      'logs/job-1.log',
      'logs/job-2.log',
      'trajectories/index.json',
      'trajectories/batch-001.jsonl',
      'code/index.json',
      'scores.json',
      'summary.json',
      'report.html',
    ]) {
      expect(existsSync(join(out, file)), file).toBe(true);
    }
    const codeIndex = JSON.parse(readFileSync(join(out, 'code/index.json'), 'utf8')) as Array<{
      tree: string;
      files: Array<{ path: string }>;
    }>;
    expect(readFileSync(join(out, 'code', codeIndex[0]!.tree, 'train.py'), 'utf8')).toContain('supervised');
    expect(readFileSync(join(out, 'events.jsonl'), 'utf8').trim().split('\n')).toHaveLength(
      new Store(join(home, 'store.sqlite')).listEvents('run-a').length,
    );
    expect(analysis.metrics).toMatchObject({
      submissions: 4,
      valid_submissions: 3,
      best: { public: 44, private: 40 },
      rollout_episodes: 8,
      compute_s: 65,
    });
    expect(analysis.iterations[0]).toMatchObject({ route: 'sft', hyperparameters: { lr: 0.002 } });

    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warn') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(String(error)));
    page.on('requestfailed', (request) => problems.push(`failed to load ${request.url()}`));
    await page.goto(`file://${join(out, 'report.html')}`, { waitUntil: 'load' });
    expect(await page.title()).toBe('a2rl run run-a');
    expect(await page.$$eval('svg#score-vs-time circle.score-point', (points) => points.length)).toBe(3);
    expect(await page.$$eval('svg#score-vs-compute circle.score-point', (points) => points.length)).toBe(3);
    // The chart is drawn, not empty: the points have a size on the page.
    const box = await (await page.$('svg#score-vs-time circle.score-point'))!.boundingBox();
    expect(box!.width).toBeGreaterThan(0);
    expect(await page.$$eval('svg#job-timeline rect.job', (bars) => bars.length)).toBe(2);
    // Every relative link leads to a file of the export.
    const links = await page.$$eval('a[href]', (anchors) => anchors.map((a) => a.getAttribute('href')!));
    expect(links.length).toBeGreaterThan(5);
    for (const link of links) expect(existsSync(join(out, link)), link).toBe(true);
    // An operator's own client saved no transcript: the timeline holds the server's record, and says so.
    expect(await page.$eval('#timeline + p', (p) => p.textContent)).toContain('No agent transcript');
    expect(await page.$$eval('#timeline-entries li[data-kind="tool"] b', (titles) => titles.map((t) => t.textContent))).toEqual([
      'run_training',
    ]);
    expect(await page.$$eval('#timeline-entries li[data-kind="score"]', (entries) => entries.length)).toBe(4);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('puts the agent messages from its transcript on one searchable timeline with its tool calls, jobs and scores', async () => {
    const { store, home } = newStore();
    seedRun(store, home, { id: 'run-t', agent: 'claude-code', driverModel: 'scripted', submissions: [{ public: 30, private: 28 }] });
    const run = store.getRun('run-t')!;
    const transcript = join(run.dir, 'agent', 'transcript.jsonl');
    // Claude Code's stream-json, as the launcher saves it: assistant blocks, tool results, the closing result.
    const assistant = (id: string, block: object) => ({ type: 'assistant', message: { id, model: 'scripted', content: [block] } });
    const toolUse = (id: string, name: string, input: object) =>
      assistant(`msg-${id}`, { type: 'tool_use', id, name: `mcp__a2rl__${name}`, input });
    const toolResult = (id: string, text: string) => ({
      type: 'user',
      message: { content: [{ type: 'tool_result', tool_use_id: id, content: [{ type: 'text', text }] }] },
    });
    mkdirSync(join(run.dir, 'agent'), { recursive: true });
    writeFileSync(
      transcript,
      [
        assistant('msg-1', { type: 'text', text: 'Plan: supervised fine-tuning on the train split first.' }),
        toolUse('c1', 'run_training', { command: 'python3 code/train.py' }),
        toolResult('c1', 'Started job-1'),
        toolUse('c2', 'job_status', { job_id: 'job-1', wait_seconds: 50 }),
        toolResult('c2', 'job-1 succeeded'),
        assistant('msg-2', { type: 'text', text: 'The loss went down to 0.4; submitting output/final.' }),
        toolUse('c3', 'submit_artifact', { path: 'output/final' }),
        toolResult('c3', 'Queued sub-1'),
        assistant('msg-3', { type: 'text', text: 'Submitted; waiting for its grade.' }),
        { type: 'result', usage: { input_tokens: 10, output_tokens: 5 }, total_cost_usd: 0.01 },
      ]
        .map((line) => JSON.stringify(line))
        .join('\n'),
    );
    // What the launcher and the server recorded around the seeded run's own events (run-relative seconds).
    const at = (s: number) => ({ run_id: 'run-t', at: run.created_at + s * 1000, t_rel_ms: s * 1000 });
    store.insertEvent({
      ...at(0),
      kind: 'agent',
      name: 'launched',
      data: JSON.stringify({ agent: 'claude-code', driver_model: 'scripted', transcript }),
    });
    store.insertEvent({
      ...at(55),
      kind: 'tool',
      name: 'job_status',
      data: JSON.stringify({ arguments: { job_id: 'job-1' }, result: { state: 'succeeded' }, duration_ms: 5000 }),
    });
    store.insertEvent({
      ...at(75),
      kind: 'tool',
      name: 'submit_artifact',
      data: JSON.stringify({ arguments: { path: 'output/final' }, result: { submission_id: 'sub-1' }, duration_ms: 100 }),
    });
    const out = join(home, 'export');
    exportRun(store, 'run-t', out);
    store.close();

    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(String(error)));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    await page.goto(`file://${join(out, 'report.html')}`, { waitUntil: 'load' });
    expect(await page.$eval('#timeline + p', (p) => p.textContent)).toContain("agent's messages are from its transcript (claude-code");
    const entries = await page.$$eval('#timeline-entries li', (items) =>
      items.map((li) => ({
        kind: li.dataset.kind!,
        title: li.querySelector('b')!.textContent!,
        text: li.querySelector('.text')?.textContent ?? '',
      })),
    );
    const index = (kind: string, match: string) => entries.findIndex((e) => e.kind === kind && (e.title + e.text).includes(match));
    const order = [
      index('message', 'Plan: supervised fine-tuning'),
      index('tool', 'run_training'),
      index('job', 'job-1 training started'),
      index('job', 'job-1 training succeeded'),
      index('tool', 'job_status'),
      index('message', 'The loss went down'),
      index('tool', 'submit_artifact'),
      index('submission', 'sub-1 submitted'),
      index('message', 'waiting for its grade'),
      index('score', 'sub-1 scored 30 public, 28 private'),
      index('run', 'run ended'),
    ];
    expect(
      order.every((i) => i >= 0),
      JSON.stringify(entries, null, 1),
    ).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    // Each call once: the transcript's call and the server's record of it are one entry, with the server's result.
    expect(entries.filter((e) => e.kind === 'tool').map((e) => e.title)).toEqual(['run_training', 'job_status', 'submit_artifact']);
    expect(entries[index('tool', 'run_training')]!.text).toContain('"job_id":"job-1"');

    const visible = () =>
      page.$$eval('#timeline-entries li', (items) =>
        items.filter((li) => !li.hidden && li.offsetHeight > 0).map((li) => li.querySelector('b')!.textContent),
      );
    await page.type('#timeline-search', 'loss went');
    expect(await visible()).toEqual(['agent']);
    expect(await page.$eval('#timeline-count', (c) => c.textContent)).toBe(`1 of ${entries.length} entries match`);
    await page.click('#timeline-search', { clickCount: 3 });
    await page.keyboard.press('Backspace');
    await page.type('#timeline-search', 'JOB-1 started');
    expect(await visible()).toEqual(['job-1 training started']);
    await page.click('#timeline-search', { clickCount: 3 });
    await page.keyboard.press('Backspace');
    expect(await visible()).toHaveLength(entries.length);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('keeps the report bounded for a huge transcript, and says what it cut', () => {
    const { store, home } = newStore();
    seedRun(store, home, { id: 'run-h', agent: 'claude-code', submissions: [{ public: 30, private: 28 }] });
    const run = store.getRun('run-h')!;
    const transcript = join(run.dir, 'agent', 'transcript.jsonl');
    mkdirSync(join(run.dir, 'agent'), { recursive: true });
    const long = 'x'.repeat(2500);
    // A long session: 6,000 turns, each a message and a call of the agent's own (no server record pairs them).
    const lines = Array.from({ length: 6000 }, (_, i) => [
      JSON.stringify({
        type: 'assistant',
        message: {
          id: `m${i}`,
          model: 'scripted',
          content: [
            { type: 'text', text: `step ${i} ${long}` },
            { type: 'tool_use', id: `c${i}`, name: 'mcp__a2rl__list_files', input: { path: '.' } },
          ],
        },
      }),
      JSON.stringify({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: `c${i}`, content: 'code/ data/' }] } }),
    ]).flat();
    writeFileSync(transcript, lines.join('\n'));
    store.insertEvent({
      run_id: 'run-h',
      at: run.created_at,
      t_rel_ms: 0,
      kind: 'agent',
      name: 'launched',
      data: JSON.stringify({ agent: 'claude-code', transcript }),
    });
    const out = join(home, 'export');
    exportRun(store, 'run-h', out);
    store.close();
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    // 16 MB of transcript; a report of a few MB at most.
    expect(html.length).toBeLessThan(4 * 2 ** 20);
    expect(html).toMatch(/\d+ of \d+ entries left out \(the first and last 1000 are shown\)/);
    expect(html).toContain(`texts cut to ${timelineLimits.textChars} characters`);
    expect(html).toContain('step 0 xxx');
    expect(html).toContain('step 5999 xxx');
    expect(html).not.toContain('step 3000 xxx');
  });

  it('writes an LLM narrative from the facts through an OpenAI-compatible endpoint, and a clear error when it is unreachable', async () => {
    const { store, home } = newStore();
    seedRun(store, home, { id: 'run-n', submissions: [{ public: 30, private: 28 }] });
    const analysis = analyzeRun(loadRunFacts(store, 'run-n'));
    store.close();
    const llm = await startFakeLlm(() => 'The agent fine-tuned once and gained 20 points.');
    try {
      const text = await writeNarrative(analysis, { baseUrl: llm.baseUrl, model: 'narrator' });
      expect(text).toBe('The agent fine-tuned once and gained 20 points.');
      const facts = JSON.parse(llm.requests[0]!.body.messages.at(-1)!.content) as { metrics: { best: { public: number } } };
      expect(facts.metrics.best.public).toBe(30);
    } finally {
      await llm.close();
    }
    await expect(writeNarrative(analysis, { baseUrl: llm.baseUrl, model: 'narrator', timeoutMs: 2000 })).rejects.toThrow(
      /could not be reached.*drop --llm/,
    );
  });
});

describe('leaderboard', () => {
  it('groups repeated runs by agent, driver model and task, with mean, std, bootstrap CI and success rate', () => {
    const { store, home } = newStore();
    // Final scores (private of the best public submission): 40, 20, baseline 12 (no graded submission).
    seedRun(store, home, { id: 'a1', agent: 'agent-x', driverModel: 'model-1', submissions: [{ public: 44, private: 40 }] });
    seedRun(store, home, {
      id: 'a2',
      agent: 'agent-x',
      driverModel: 'model-1',
      submissions: [
        { public: 15, private: 14 },
        { public: 22, private: 20 },
      ],
    });
    seedRun(store, home, { id: 'a3', agent: 'agent-x', driverModel: 'model-1', submissions: ['failed'] });
    seedRun(store, home, { id: 'b1', agent: 'agent-x', driverModel: 'model-2', submissions: [{ public: 30, private: 31 }] });
    const rows = buildLeaderboard(runResults(store, 'micro-gsm8k'));
    store.close();
    expect(rows).toHaveLength(2);
    const x1 = rows.find((r) => r.driver_model === 'model-1')!;
    expect(x1.runs).toBe(3);
    expect(x1.mean).toBe(24);
    expect(x1.std).toBeCloseTo(standardDeviation([40, 20, 12])!, 2);
    expect(x1.ci_low).toBeGreaterThanOrEqual(12);
    expect(x1.ci_high).toBeLessThanOrEqual(40);
    expect(x1.ci_low).toBeLessThan(x1.mean!);
    expect(x1.ci_high).toBeGreaterThan(x1.mean!);
    // Margin 10 over the baseline's 12: only 40 succeeds (20 gains 8; the run without a grade gains nothing).
    expect(x1.success_rate).toBe(0.33);
    const x2 = rows.find((r) => r.driver_model === 'model-2')!;
    expect(x2).toMatchObject({ runs: 1, mean: 31, std: null, ci_low: 31, ci_high: 31, success_rate: 1 });
    const csv = leaderboardCsv(rows).trim().split('\n');
    expect(csv[0]).toContain('mean final score');
    expect(csv).toHaveLength(3);
  });

  it('bootstrap intervals are deterministic and narrow as runs agree', () => {
    expect(bootstrapCi([1, 2, 3, 4, 5])).toEqual(bootstrapCi([1, 2, 3, 4, 5]));
    expect(bootstrapCi([7, 7, 7])).toEqual([7, 7]);
    const [low, high] = bootstrapCi([0, 100, 0, 100, 0, 100, 0, 100]);
    expect(low).toBeLessThan(50);
    expect(high).toBeGreaterThan(50);
  });

  it('never mixes runs graded in different environments (stand-in or upstream package, data) in one row', () => {
    const version = (env: string) => `1+abc/env:${env}/judge:rubric`;
    expect(environmentOf(version('web_agent_site=stand-in;data=0123456789ab'))).toBe('web_agent_site=stand-in;data=0123456789ab');
    expect(environmentOf('1+abc')).toBe('');
    const run = (id: string, final: number, environment: string) => ({
      ...{ run_id: id, agent: 'agent-x', driver_model: 'model-1', task: 'micro-gsm8k', final, baseline: 0, improvement: final },
      ...{ success: false, infrastructure_failure: null, integrity: 'clean' as const, tokens: null, cost_usd: null, environment },
    });
    const rows = buildLeaderboard([
      run('s1', 10, environmentOf(version('web_agent_site=stand-in'))),
      run('s2', 20, environmentOf(version('web_agent_site=stand-in'))),
      run('u1', 90, environmentOf(version('web_agent_site=upstream:webshop@0.4.2'))),
    ]);
    expect(rows.map((r) => [r.environment, r.runs, r.mean])).toEqual([
      ['web_agent_site=upstream:webshop@0.4.2', 1, 90],
      ['web_agent_site=stand-in', 2, 15],
    ]);
    expect(leaderboardCsv(rows)).toContain('micro-gsm8k (web_agent_site=stand-in)');
  });
});

describe('a2rl report, runs export and leaderboard commands', () => {
  const run = promisify(execFile);

  it('print Markdown and JSON, write the leaderboard files, and refuse an unknown run clearly', async () => {
    const { store, home } = newStore();
    seedRun(store, home, { id: 'c1', agent: 'agent-y', submissions: [{ public: 33, private: 30 }] });
    store.close();
    const md = await run('node', [cliEntry, '--home', home, 'report', 'c1', '--format', 'md']);
    expect(md.stdout).toContain('| best submission (public / private) | sub-1: 33.0 / 30.0 |');
    expect(md.stdout).toContain('Integrity: **clean**. Read 1 files (100 B); not read: nothing.');
    const json = JSON.parse((await run('node', [cliEntry, '--home', home, 'report', 'c1', '--format', 'json'])).stdout) as {
      metrics: { valid_submissions: number };
      integrity: { verdict: string };
    };
    expect(json.metrics.valid_submissions).toBe(1);
    expect(json.integrity.verdict).toBe('clean');
    const llm = await startFakeLlm(() => 'It trained once and won.');
    try {
      const narrated = await run('node', [
        cliEntry,
        '--home',
        home,
        'report',
        'c1',
        '--format',
        'md',
        '--llm',
        '--llm-url',
        llm.baseUrl,
        '--llm-model',
        'm',
      ]);
      expect(narrated.stdout).toContain('## Narrative\n\nIt trained once and won.');
    } finally {
      await llm.close();
    }
    const out = join(home, 'board');
    await run('node', [cliEntry, '--home', home, 'leaderboard', '--task', 'micro-gsm8k', '--out', out]);
    expect(readFileSync(join(out, 'leaderboard.csv'), 'utf8')).toContain('micro-gsm8k,agent-y,–,1,30.00');
    expect(existsSync(join(out, 'leaderboard.html'))).toBe(true);
    const missing = await run('node', [cliEntry, '--home', home, 'report', 'nope']).catch(
      (error: { stderr: string; code: number }) => error,
    );
    expect(missing).toMatchObject({ code: 3 });
    expect((missing as { stderr: string }).stderr).toContain('No run "nope"');
  });
});
