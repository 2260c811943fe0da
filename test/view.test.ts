import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { adminToken, type HttpServer, killServer, startHttpServer } from './helpers/http-server.js';
import { call } from './helpers/mcp.js';
import { recordCheckVerdict } from './helpers/integrity.js';
import { tempDir } from './helpers/sandbox.js';

/** Where the screenshots of the three pages are kept (ignored by git; CI may keep them as artifacts). */
const artifacts = join(packageRoot, 'test-artifacts', 'view');
const task = getTask('micro-gsm8k');

/** Ended runs with graded submissions, written into the store as the server writes them: rows for the leaderboard. */
function seedEndedRuns(home: string): void {
  const store = new Store(join(home, 'store.sqlite'));
  const grade = (hash: string, publicScore: number, privateScore: number) =>
    store.insertGrade({
      task_id: task.id,
      grader_version: task.graderVersion,
      content_hash: hash,
      public_score: publicScore,
      private_score: privateScore,
      details: '{}',
      duration_ms: 1,
      created_at: 0,
    });
  grade(task.baseModelHash, 10, 12);
  const seeded: Array<[id: string, agent: string, scores: number[]]> = [
    ['seed-a1', 'agent-a', [20, 24]],
    ['seed-a2', 'agent-a', [30, 31]],
    ['seed-b1', 'agent-b', [11, 13]],
  ];
  for (const [id, agent, [publicScore, privateScore]] of seeded) {
    const createdAt = Date.now() - 600_000;
    store.insertRun({
      id,
      task_id: task.id,
      label: null,
      budget: JSON.stringify({ wallSeconds: 1200, computeSeconds: 1200, submissions: 5, rolloutEpisodes: 1000 }),
      dir: join(home, 'runs', id),
      sandbox: 'bwrap',
      grader_version: task.graderVersion,
      owner: '0-0',
      created_at: createdAt,
    });
    store.setRunAgent(id, { agent, driver_model: 'model-x' });
    recordCheckVerdict(store, id);
    const event = (kind: string, name: string, data: unknown) =>
      store.insertEvent({ run_id: id, at: createdAt + 1000, t_rel_ms: 1000, kind, name, data: JSON.stringify(data) });
    event('tool', 'submit_artifact', { arguments: { path: 'output/final' }, result: { submission_id: 'sub-1' }, duration_ms: 3 });
    const inserted = store.insertSubmissionWithin(5, {
      run_id: id,
      path: 'output/final',
      note: null,
      content_hash: `${id}-model`,
      files: 2,
      bytes: 10,
      created_at: createdAt + 1000,
    });
    if (!('inserted' in inserted)) throw new Error('seeding failed');
    grade(`${id}-model`, publicScore!, privateScore!);
    store.setSubmissionState(inserted.inserted.id, 'graded', null, createdAt + 2000);
    store.endRun(id, 'the agent disconnected', createdAt + 3000);
    event('run', 'ended', { reason: 'the agent disconnected' });
  }
  store.close();
}

async function cli(home: string, args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [cliEntry, ...args], { env: { ...process.env, A2RL_HOME: home } });
  return stdout;
}

async function createRun(url: string): Promise<{ run_id: string; token: string }> {
  const response = await fetch(`${url}/runs`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ task: task.id, budget: 'wall=30m', label: 'view-test' }),
  });
  if (response.status !== 201) throw new Error(`POST /runs answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as { run_id: string; token: string };
}

/** The text of each body row's cells of a page's table. */
const tableCells = (page: Page, selector: string): Promise<string[][]> =>
  page.$$eval(`${selector} tbody tr`, (rows) => rows.map((row) => [...row.querySelectorAll('td')].map((td) => td.textContent!.trim())));

describe('the live web view (/view)', () => {
  let home: string;
  let server: HttpServer;
  let browser: Browser;
  let page: Page;
  let viewToken: string;
  let run: { run_id: string; token: string };
  let client: Client;

  beforeAll(async () => {
    home = tempDir('view');
    seedEndedRuns(home);
    mkdirSync(artifacts, { recursive: true });
    // Jobs of every kind may run at once here: the runs' baseline gradings must not hold the training job back.
    server = await startHttpServer(home, ['--max-jobs', '8']);
    viewToken = (await cli(home, ['view-token'])).trim();
    run = await createRun(server.url);
    client = new Client({ name: 'a2rl-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${run.token}` } },
      }),
    );
    browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
  });

  afterAll(async () => {
    await client?.close();
    await browser?.close();
    if (server) await killServer(server);
  });

  it('refuses a run token, the admin token and no token, with what to do; the view token opens it and leaves the URL', async () => {
    expect(viewToken).toMatch(/^[\w-]{40,}$/);
    expect((await cli(home, ['view-token'])).trim()).toBe(viewToken);
    for (const token of [run.token, adminToken]) {
      const refused = await fetch(`${server.url}/view`, { headers: { Authorization: `Bearer ${token}` } });
      expect(refused.status).toBe(401);
      expect(await refused.text()).toContain('a2rl view-token');
    }
    expect((await fetch(`${server.url}/view/runs/${run.run_id}/live`)).status).toBe(401);
    const byRunToken = await page.goto(`${server.url}/view?token=${encodeURIComponent(run.token)}`);
    expect(byRunToken!.status()).toBe(401);
    expect(await page.$eval('#error', (e) => e.textContent)).toContain('Run tokens and the admin token never do');

    const opened = await page.goto(`${server.url}/view?token=${encodeURIComponent(viewToken)}`);
    expect(opened!.status()).toBe(200);
    expect(page.url()).toBe(`${server.url}/view`);
    expect(await page.$$eval('#runs tbody tr', (rows) => rows.map((r) => r.getAttribute('data-run')))).toEqual(
      expect.arrayContaining([run.run_id, 'seed-a1', 'seed-a2', 'seed-b1']),
    );
    // Filtered by agent: only that agent's runs.
    await page.select('select[name="agent"]', 'agent-b');
    await Promise.all([page.waitForNavigation(), page.click('.filters button')]);
    expect(await page.$$eval('#runs tbody tr', (rows) => rows.map((r) => r.getAttribute('data-run')))).toEqual(['seed-b1']);
  });

  it('lists a run started while the runs page is open, live, and fits a phone', async () => {
    await page.goto(`${server.url}/view`);
    await page.waitForFunction(() => document.getElementById('live-state')?.textContent === 'live');
    const started = await createRun(server.url);
    await page.waitForSelector(`#runs tr[data-run="${started.run_id}"]`, { timeout: 30_000 });
    expect(await page.$eval(`#runs tr[data-run="${started.run_id}"]`, (tr) => tr.textContent)).toContain('micro-gsm8k');
    await page.screenshot({ path: join(artifacts, 'runs.png') });

    // Keyboard first: the first Tab reaches the skip link; nothing overflows a phone's width.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.setViewport({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.setViewport({ width: 1280, height: 800 });
  });

  it("shows a tool call on its run's page within 2 s of the call", async () => {
    await page.goto(`${server.url}/view/runs/${run.run_id}`);
    await page.waitForFunction(() => document.getElementById('live-state')?.textContent === 'live');
    const before = await page.$$eval('#tools tbody tr', (rows) => rows.length);
    const answered = await call(client, 'list_files', { path: '.' });
    expect(answered.isError).toBe(false);
    const calledAt = Date.now();
    await page.waitForFunction(
      (count) =>
        document.querySelectorAll('#tools tbody tr').length > count &&
        document.querySelector('#tools tbody tr')!.textContent!.includes('list_files'),
      { timeout: 10_000 },
      before,
    );
    expect(Date.now() - calledAt).toBeLessThan(2000);
  });

  it('updates the job log tail and the training curve while a training job runs', async () => {
    const script =
      'import time\nfor step in range(1, 41):\n    print(f"step {step}/40 loss {3 / step:.4f}", flush=True)\n    time.sleep(0.5)\n';
    expect((await call(client, 'write_file', { path: 'code/curve.py', content: script })).isError).toBe(false);
    const started = await call(client, 'run_training', { command: 'python3 code/curve.py' });
    expect(started.isError, started.text).toBe(false);
    const jobName = started.structured.job_id as string;
    const card = `//article[contains(@class, "job")][h3[starts-with(normalize-space(), "${jobName} ")]]`;
    const pointsWhileRunning = async (atLeast: number): Promise<number> => {
      const handle = await page.waitForFunction(
        (xpath, least) => {
          const article = document.evaluate(xpath, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null)
            .singleNodeValue as HTMLElement | null;
          const points = Number(article?.querySelector('.chart')?.getAttribute('data-points') ?? 0);
          return points >= least && { points, running: article!.querySelector('.status')!.textContent!.startsWith('running') };
        },
        { timeout: 60_000 },
        card,
        atLeast,
      );
      const seen = (await handle.jsonValue()) as { points: number; running: boolean };
      expect(seen.running).toBe(true);
      return seen.points;
    };
    const first = await pointsWhileRunning(2);
    const later = await pointsWhileRunning(first + 3);
    const [article] = await page.$$(`xpath/.${card}`);
    expect(await article!.$eval('pre.log', (pre) => pre.textContent)).toMatch(new RegExp(`step ${later}/40 loss`));
    expect(await article!.$('.chart canvas')).not.toBeNull();
    await page.screenshot({ path: join(artifacts, 'run.png'), fullPage: false });
    // The static report link: the run's export, written when opened, its report served as a page.
    const report = await page.goto(`${server.url}/view/runs/${run.run_id}/export/report.html`);
    expect(report!.status()).toBe(200);
    expect(await page.$eval('h1', (h1) => h1.textContent)).toBe(`Run ${run.run_id}`);
    await page.goto(`${server.url}/view/runs/${run.run_id}`);
    await page.setViewport({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.setViewport({ width: 1280, height: 800 });
  });

  it('shows the leaderboard a2rl leaderboard writes, with the runs behind each row', async () => {
    await page.goto(`${server.url}/view/leaderboard`);
    const shown = await tableCells(page, '#leaderboard');
    const out = tempDir('view-leaderboard');
    await cli(home, ['leaderboard', '--out', out]);
    const csv = readFileSync(join(out, 'leaderboard.csv'), 'utf8').trim().split('\n').slice(1);
    expect(shown.map((cells) => cells.slice(0, -1))).toEqual(csv.map((line) => line.split(',').map((value) => value || '–')));
    expect(shown.map((cells) => cells.at(-1))).toEqual(['seed-a1 seed-a2', 'seed-b1']);
    // The view's JSON is a2rl leaderboard --json, row for row, with the runs behind each row added.
    const listed = JSON.parse(await cli(home, ['leaderboard', '--json'])) as Array<Record<string, unknown>>;
    const served = (await (
      await fetch(`${server.url}/view/leaderboard.json`, { headers: { Authorization: `Bearer ${viewToken}` } })
    ).json()) as Array<Record<string, unknown>>;
    expect(served.map(({ run_ids: _runs, ...row }) => row)).toEqual(listed);
    await page.screenshot({ path: join(artifacts, 'leaderboard.png') });
  });

  it('a2rl view serves the same view alone on loopback, and serve --http refuses a view token that is the admin token', async () => {
    const alone = spawn(process.execPath, [cliEntry, 'view', '--port', '0'], {
      env: { ...process.env, A2RL_HOME: home },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      let stderr = '';
      const url = await new Promise<string>((resolve, reject) => {
        alone.stderr!.on('data', (chunk: Buffer) => {
          stderr += chunk;
          const match = /view at (http:\/\/127\.0\.0\.1:\d+)\/view/.exec(stderr);
          if (match) resolve(match[1]!);
        });
        alone.once('exit', (code) => reject(new Error(`a2rl view exited with ${code}: ${stderr}`)));
      });
      const opened = await fetch(`${url}/view`, { headers: { Authorization: `Bearer ${viewToken}` } });
      expect(opened.status).toBe(200);
      expect(await opened.text()).toContain(`data-run="${run.run_id}"`);
      expect((await fetch(`${url}/view`, { headers: { Authorization: `Bearer ${run.token}` } })).status).toBe(401);
    } finally {
      alone.kill('SIGTERM');
    }
    const refused = await promisify(execFile)(process.execPath, [cliEntry, 'serve', '--http', '--port', '0'], {
      env: { ...process.env, A2RL_HOME: tempDir('view-same-token'), A2RL_ADMIN_TOKEN: adminToken, A2RL_VIEW_TOKEN: adminToken },
      // Killed if it started after all: the assertion below then fails, saying so.
      timeout: 60_000,
    }).then(
      () => 'started',
      (error: { stderr: string }) => error.stderr,
    );
    expect(refused).toContain('A2RL_VIEW_TOKEN is the admin token');
  });
});
