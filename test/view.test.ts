import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFile, spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import puppeteer, { type Browser, type BrowserContext, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { ViewData } from '../src/view/data.js';
import { DiskAccounts } from '../src/view/disk.js';
import { LiveFeed, type LiveStream } from '../src/view/live.js';
import { RunStream } from '../src/view/streams.js';
import { loginCode, type ViewSession, ViewSessions, viewToken as viewTokenOf } from '../src/view/token.js';
import { openView, type ViewServer } from '../src/view/server.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { adminToken, type HttpServer, killServer, startHttpServer } from './helpers/http-server.js';
import { call } from './helpers/mcp.js';
import { recordCheckVerdict } from './helpers/integrity.js';
import { startedJob, succeeded } from './helpers/jobs.js';
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

/** One Chromium for the file's tests (each block in a browser context of its own): a launch costs seconds. */
let launched: Promise<Browser> | undefined;
const chromium = () =>
  (launched ??= puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] }));
afterAll(async () => {
  await (await launched)?.close();
});

/** The text of each body row's cells of a page's table. */
const tableCells = (page: Page, selector: string): Promise<string[][]> =>
  page.$$eval(`${selector} tbody tr`, (rows) => rows.map((row) => [...row.querySelectorAll('td')].map((td) => td.textContent!.trim())));

describe('the live web view (/view)', () => {
  let home: string;
  let server: HttpServer;
  let context: BrowserContext;
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
    context = await (await chromium()).createBrowserContext();
    page = await context.newPage();
    await page.setViewport({ width: 1280, height: 800 });
  });

  afterAll(async () => {
    await client?.close();
    await context?.close();
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
    const inUrl = await page.goto(`${server.url}/view?token=${encodeURIComponent(viewToken)}`);
    expect(inUrl!.status()).toBe(401);
    expect(await page.$eval('#error', (e) => e.textContent)).toContain('takes no token in its URL');

    const opened = await page.goto((await cli(home, ['view-token', '--link', server.url])).trim());
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
    // The static report: the run's export, written when its button is pressed, its report served as a page.
    const [report] = await Promise.all([page.waitForNavigation(), page.click('form.links button')]);
    expect(report!.status()).toBe(200);
    expect(page.url()).toBe(`${server.url}/view/runs/${run.run_id}/export/report.html`);
    expect(await page.$eval('h1', (h1) => h1.textContent)).toBe(`Run ${run.run_id}`);
    await page.goto(`${server.url}/view/runs/${run.run_id}`);
    await page.setViewport({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.setViewport({ width: 1280, height: 800 });
  });

  it('shows the leaderboard a2rl leaderboard writes, with the runs behind each row', async () => {
    await page.goto(`${server.url}/view/leaderboard`);
    // The page never ranks to answer: a board not ranked yet (or stale) comes over its live stream once ranked.
    await page.waitForFunction(
      () => document.querySelector('#board #leaderboard') !== null && document.querySelector('#board .updating') === null,
    );
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
      const [url, link] = await new Promise<string[]>((resolve, reject) => {
        alone.stderr!.on('data', (chunk: Buffer) => {
          stderr += chunk;
          const match = /view at (http:\/\/127\.0\.0\.1:\d+)\/view; log in within a minute at (\S+)/.exec(stderr);
          if (match) resolve([match[1]!, match[2]!]);
        });
        alone.once('exit', (code) => reject(new Error(`a2rl view exited with ${code}: ${stderr}`)));
      });
      // The login link it prints opens a session, once.
      const login = await fetch(link!, { redirect: 'manual' });
      expect([login.status, login.headers.get('location'), login.headers.get('set-cookie')]).toEqual([
        303,
        '/view',
        expect.stringMatching(/^a2rl_view_\d+=[\w-]{40,}; Path=\/view; HttpOnly; SameSite=Strict$/),
      ]);
      expect((await fetch(link!, { redirect: 'manual' })).status).toBe(401);
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

describe("the view's login, CSRF and Origin checks, and the report under its CSP", () => {
  let home: string;
  let store: Store;
  let view: ViewServer;
  let url: string;
  let token: string;
  let context: BrowserContext;
  let page: Page;
  /** Another site's pages, on another port of 127.0.0.1 (the same site to a browser's SameSite rules). */
  let other: Server;
  let otherUrl: string;
  const exported = () => existsSync(join(home, 'view-exports', 'seed-a1'));

  beforeAll(async () => {
    home = tempDir('view-auth');
    seedEndedRuns(home);
    store = new Store(join(home, 'store.sqlite'));
    token = viewTokenOf(home);
    // The view as a2rl view serves it (its process behind the front door), on a port of its own.
    view = await openView({ store, home, token, host: '127.0.0.1', port: 0, allowHosts: [] });
    url = view.baseUrl;
    other = createServer((req, res) => {
      const target = `${url}/view/runs/seed-a1/export`;
      // Another site's forms: a POST with a guessed CSRF token, and a GET of the report (which must not write it).
      const form =
        req.url === '/post'
          ? `<form method="post" action="${target}"><input name="csrf" value="guessed"><button>Win a prize</button></form>`
          : `<form method="get" action="${target}/report.html"><button>Win a prize</button></form>`;
      res.writeHead(200, { 'Content-Type': 'text/html' }).end(`<!doctype html>${form}`);
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    context = await (await chromium()).createBrowserContext();
    page = await context.newPage();
  });

  afterAll(async () => {
    await context?.close();
    other?.close();
    view?.close();
    store?.close();
  });

  it('a login link opens a session once, within a minute, and leaves no credential in the URL, history or a cookie a script reads', async () => {
    const link = `${url}/view?code=${loginCode(token)}`;
    const opened = await page.goto(link);
    expect(opened!.status()).toBe(200);
    expect(page.url()).toBe(`${url}/view`);
    const cookie = (await page.cookies()).find((c) => c.name === `a2rl_view_${new URL(url).port}`)!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/view' });
    expect(cookie.value).not.toContain(token);
    expect(await page.evaluate(() => document.cookie)).toBe('');
    const cdp = await page.createCDPSession();
    const history = (await cdp.send('Page.getNavigationHistory')).entries.map((entry) => entry.url);
    expect(history.filter((url) => url.includes('code=') || url.includes(token))).toEqual([]);
    await cdp.detach();

    // The same link again, by this browser still logged in: just its page; by another (no session): refused.
    const again = await page.goto(link);
    expect([again!.status(), page.url()]).toEqual([200, `${url}/view`]);
    const other = await (await chromium()).createBrowserContext();
    const stranger = await other.newPage();
    const reused = await stranger.goto(link);
    expect(reused!.status()).toBe(401);
    expect(await stranger.$eval('#error', (e) => e.textContent)).toContain('was used already');
    await stranger.waitForFunction(() => !location.search.includes('code='));
    await other.close();

    const refusal = async (query: string, headers: Record<string, string> = {}) => {
      const answer = await fetch(`${url}/view?${query}`, { headers, redirect: 'manual' });
      return `${answer.status} ${await answer.text()}`;
    };
    expect(await refusal(`code=${loginCode(token, Date.now() - 61_000)}`)).toMatch(/^401 [^]*expired/);
    expect(await refusal(`code=${loginCode('not-the-view-token')}`)).toMatch(/^401 [^]*not one this server made/);
    expect(await refusal('', { Cookie: `a2rl_view_${new URL(url).port}=a-session-the-server-never-made` })).toMatch(
      /^401 [^]*session ended/,
    );
    // A script's bearer header still opens it.
    expect(await refusal('', { Authorization: `Bearer ${token}` })).toMatch(/^200 /);
    // A live stream asked for by another port's page (a browser says `same-site`) or another site's: refused.
    for (const site of ['same-site', 'cross-site']) {
      const answer = await fetch(`${url}/view/live`, { headers: { Authorization: `Bearer ${token}`, 'Sec-Fetch-Site': site } });
      expect(`${answer.status} ${await answer.text()}`).toMatch(/^403 [^]*not from the view/);
    }
  });

  it('ends a session after 12 h unused, or 7 days after its login however used', () => {
    const sessions = new ViewSessions(token);
    const login = Date.parse('2026-01-01T00:00:00Z');
    const hour = 3600_000;
    const idle = sessions.redeem(loginCode(token, login), login) as ViewSession;
    expect(sessions.get(idle.id, login + 11 * hour)).toBeDefined();
    expect(sessions.get(idle.id, login + 22 * hour)).toBeDefined();
    expect(sessions.get(idle.id, login + 34 * hour + 1)).toBeUndefined();
    const busy = sessions.redeem(loginCode(token, login), login) as ViewSession;
    for (let t = login; t < login + 7 * 24 * hour; t += 6 * hour) expect(sessions.get(busy.id, t)).toBeDefined();
    expect(sessions.get(busy.id, login + 7 * 24 * hour)).toBeUndefined();
  });

  // On plain HTTP that port still receives the session cookie (cookies ignore ports): only a TLS proxy keeps it from it.
  it("another 127.0.0.1 port's form cannot make the view write an export; the view's own button does, and the report's search runs under its CSP", async () => {
    const pressOn = async (at: Page, url: string) => {
      await at.goto(url);
      const [answer] = await Promise.all([at.waitForNavigation(), at.click('button')]);
      return { status: answer!.status(), error: await at.$eval('#error', (e) => e.textContent).catch(() => '') };
    };
    const forged = await pressOn(page, `${otherUrl}/post`);
    expect(forged.status).toBe(403);
    expect(forged.error).toContain('not from the view');
    const fetched = await pressOn(page, `${otherUrl}/get`);
    expect(fetched.status).toBe(404);
    expect(fetched.error).toContain('Write the export');
    expect(exported()).toBe(false);
    // From the view's own page (its Origin) but without the session's CSRF token: refused too.
    await page.goto(`${url}/view/runs/seed-a1`);
    const withoutToken = await page.evaluate(
      async () => (await fetch(`${location.pathname}/export`, { method: 'POST', body: new URLSearchParams({ csrf: 'guessed' }) })).status,
    );
    expect(withoutToken).toBe(403);
    expect(exported()).toBe(false);

    const console: string[] = [];
    page.on('console', (message) => console.push(message.text()));
    const [report] = await Promise.all([page.waitForNavigation(), page.click('form.links button')]);
    expect(report!.status()).toBe(200);
    expect(page.url()).toBe(`${url}/view/runs/seed-a1/export/report.html`);
    expect(existsSync(join(home, 'view-exports', 'seed-a1', 'report.js'))).toBe(true);
    const scriptSources = report!
      .headers()
      ['content-security-policy']!.split(';')
      .find((d) => d.trim().startsWith('script-src'));
    expect(scriptSources?.trim()).toBe("script-src 'self'");
    const total = await page.$$eval('#timeline-entries > li', (entries) => entries.length);
    await page.type('#timeline-search', 'submit_artifact');
    await page.waitForFunction(() => document.getElementById('timeline-count')!.textContent!.includes('match'));
    const [, shown, of] = /^(\d+) of (\d+) entries match$/.exec((await page.$eval('#timeline-count', (e) => e.textContent))!)!.map(Number);
    expect(of).toBe(total);
    expect(shown).toBeGreaterThan(0);
    expect(shown).toBeLessThan(total);
    expect(console.filter((text) => /Content Security Policy|Refused to/i.test(text))).toEqual([]);
  });

  it('a live page whose session ended stops, asking to log in again, rather than reconnecting for ever', async () => {
    await page.goto(`${url}/view/runs/seed-a1`);
    await page.waitForFunction(() => document.getElementById('live-state')!.textContent === 'live', { timeout: 15_000 });
    // The view restarted on the same port: its connection dropped, and its sessions gone with its process.
    view.close();
    view = await openView({ store, home, token, host: '127.0.0.1', port: Number(new URL(url).port), allowHosts: [] });
    await page.waitForFunction(() => document.getElementById('live-state')!.textContent!.includes('log in again'), { timeout: 15_000 });
  });
});

describe("one live connection's channels", () => {
  it('a channel whose push fails ends alone, saying so to its tab; the others go on', async () => {
    const home = tempDir('view-channels');
    seedEndedRuns(home);
    const store = new Store(join(home, 'store.sqlite'));
    const feed = new LiveFeed(store.db);
    let pushes = 0;
    const failing: LiveStream = {
      after: 0,
      push: () => Promise.reject(new Error('its run is gone')),
    };
    const working: LiveStream = {
      after: 0,
      push: async (_batch, send) => send('pushed', ++pushes),
    };
    const server = createServer(
      (_req, res) =>
        void feed.start(
          res,
          new Map([
            ['bad', failing],
            ['good', working],
          ]),
        ),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      const messages: Array<{ ch: string; event: string; data: unknown }> = [];
      let text = '';
      for await (const chunk of response.body!.pipeThrough(new TextDecoderStream())) {
        text += chunk;
        const blocks = text.split('\n\n');
        text = blocks.pop()!;
        for (const block of blocks) if (block.startsWith('data: ')) messages.push(JSON.parse(block.slice(6)));
        // Pushes to the working channel after the failure: the connection went on (catch-up, then ticks).
        if (messages.filter((m) => m.ch === 'good').length >= 3) break;
      }
      expect(messages.filter((m) => m.ch === 'good').length).toBe(3);
      expect(messages.filter((m) => m.ch === 'bad')).toEqual([
        { ch: 'bad', event: 'failed', data: { message: 'The live view stopped: its run is gone. Reload the page.' } },
      ]);
    } finally {
      feed.close();
      server.closeAllConnections();
      server.close();
      store.close();
    }
  });

  it("tells a page once a finished job's log was read whole, so its live URL stops naming that job", async () => {
    const home = tempDir('view-done');
    seedEndedRuns(home);
    const store = new Store(join(home, 'store.sqlite'));
    const job = startedJob(store, {
      runId: 'seed-a1',
      logDir: join(home, 'logs'),
      createdAt: 0,
      log: 'step 1 loss 0.9\nstep 2 loss 0.7\n',
    });
    succeeded(store, job.id, 1);
    const stream = new RunStream(new ViewData(store, new DiskAccounts(2 ** 30)), 'seed-a1', 0, new Map([[job.id, 16]]));
    const sent: Array<[string, unknown]> = [];
    const push = () => stream.push({ events: [], newRuns: [] }, (event, data) => void sent.push([event, data]));
    await push();
    expect(sent).toEqual([['log', { id: job.id, next: 32, text: 'step 2 loss 0.7\n', skipped: 0, points: [[2, 0.7]], done: true }]]);
    await push();
    expect(sent).toHaveLength(1);
    store.close();
  });
});

describe('ten tabs of the view, one live connection (issue 51)', () => {
  // `a2rl view` alone on a store this test writes as a server does: a run's events, a new run, a job's log.
  let home: string;
  let store: Store;
  let view: ReturnType<typeof spawn>;
  let url: string;
  let browser: Browser;
  let logPath: string;
  const runId = 'tabs-run';

  const appendLog = (from: number, to: number) =>
    appendFileSync(
      logPath,
      Array.from({ length: to - from + 1 }, (_, i) => `step ${from + i}/900 loss ${(1 / (from + i)).toFixed(4)}\n`).join(''),
    );
  const addRun = (id: string) =>
    store.insertRun({
      id,
      task_id: task.id,
      label: 'tabs',
      budget: JSON.stringify({ wallSeconds: 1200, computeSeconds: 1200, submissions: 5, rolloutEpisodes: 1000 }),
      dir: join(home, 'runs', id),
      sandbox: 'bwrap',
      grader_version: task.graderVersion,
      owner: '0-0',
      created_at: Date.now(),
    });
  const event = (run: string, kind: string, name: string, data: unknown) =>
    store.insertEvent({ run_id: run, at: Date.now(), t_rel_ms: 1000, kind, name, data: JSON.stringify(data) });
  /** Until `ready` holds in each page: polled on a timer, as a background tab draws no frames (the default polling's clock). */
  const waitAll = (pages: Page[], ready: () => unknown) =>
    Promise.all(pages.map((p) => p.waitForFunction(ready, { timeout: 15_000, polling: 100 })));

  beforeAll(async () => {
    home = tempDir('view-tabs');
    seedEndedRuns(home);
    store = new Store(join(home, 'store.sqlite'));
    addRun(runId);
    const job = startedJob(store, { runId, logDir: join(home, 'runs', runId, 'logs'), charged: 0, log: '' });
    logPath = job.log_path;
    expect(job.state).toBe('running');
    appendLog(1, 200);
    view = spawn(process.execPath, [cliEntry, 'view', '--port', '0'], {
      env: { ...process.env, A2RL_HOME: home },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    [url, browser] = await Promise.all([
      new Promise<string>((resolve, reject) => {
        let stderr = '';
        view.stderr!.on('data', (chunk: Buffer) => {
          stderr += chunk;
          const match = /(http:\/\/127\.0\.0\.1:\d+)\/view/.exec(stderr);
          if (match) resolve(match[1]!);
        });
        view.once('exit', (code) => reject(new Error(`a2rl view exited with ${code}: ${stderr}`)));
      }),
      puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] }),
    ]);
  });

  afterAll(async () => {
    await browser?.close();
    view?.kill('SIGTERM');
    store?.close();
  });

  it('streams to all ten (runs pages, filtered too, run pages, leaderboards), and a filtered page drops a run that leaves its filter', async () => {
    const paths = [
      '/view',
      '/view',
      '/view?state=active',
      '/view?state=active',
      `/view/runs/${runId}`,
      `/view/runs/${runId}`,
      `/view/runs/${runId}`,
      `/view/runs/${runId}`,
      '/view/leaderboard',
      '/view/leaderboard',
    ];
    const first = await browser.newPage();
    // The login link's code becomes this browser's session cookie, which every tab and the shared worker send.
    await first.goto(`${url}/view?code=${loginCode(viewTokenOf(home))}`);
    const tabs = [first, ...(await Promise.all(paths.slice(1).map(() => browser.newPage())))];
    // Three tabs as a browser without SharedWorker sees the view: they elect a leader that shares its connection.
    const withoutSharedWorker = [3, 5, 9];
    await Promise.all(
      withoutSharedWorker.map((i) => tabs[i]!.evaluateOnNewDocument(() => void delete (window as { SharedWorker?: unknown }).SharedWorker)),
    );
    await Promise.all(tabs.map((tab, i) => tab.goto(`${url}${paths[i]}`)));
    expect(await Promise.all(tabs.map((tab) => tab.evaluate(() => 'SharedWorker' in window)))).toEqual(
      tabs.map((_, i) => !withoutSharedWorker.includes(i)),
    );
    await waitAll(tabs, () => document.getElementById('live-state')?.textContent === 'live');
    const [runsPages, filtered, runPages, boards] = [tabs.slice(0, 2), tabs.slice(2, 4), tabs.slice(4, 8), tabs.slice(8)];
    expect(await filtered[0]!.$$eval('#runs tbody tr', (rows) => rows.map((r) => r.getAttribute('data-run')))).toEqual([runId]);
    // What each tab shows now is marked, so a re-rendered leaderboard is told from the first (once ranked: never for the page).
    await waitAll(boards, () => document.querySelector('#board table') !== null && document.querySelector('#board .updating') === null);
    await Promise.all(boards.map((tab) => tab.$eval('#board table', (table) => table.setAttribute('data-first', ''))));

    event(runId, 'tool', 'list_files', { arguments: { path: 'tabs-marker' }, result: {}, duration_ms: 2 });
    addRun('tabs-new');
    event('tabs-new', 'run', 'created', {});
    await Promise.all([
      waitAll(runPages, () => document.querySelector('#tools tbody tr')?.textContent?.includes('tabs-marker')),
      waitAll([...runsPages, ...filtered], () => document.querySelector('#runs tr[data-run="tabs-new"]') !== null),
    ]);

    store.endRun('tabs-new', 'the agent disconnected', Date.now());
    event('tabs-new', 'run', 'ended', { reason: 'the agent disconnected' });
    await Promise.all([
      waitAll(filtered, () => document.querySelector('#runs tr[data-run="tabs-new"]') === null),
      waitAll(runsPages, () => document.querySelector('#runs tr[data-run="tabs-new"] .state')?.textContent === 'ended'),
      waitAll(
        boards,
        () =>
          document.querySelector('#board table') !== null &&
          !document.querySelector('#board table[data-first]') &&
          document.querySelector('#board .updating') === null,
      ),
    ]);
    expect(await filtered[1]!.$$eval('#runs tbody tr', (rows) => rows.map((r) => r.getAttribute('data-run')))).toEqual([runId]);
    await Promise.all(tabs.slice(1).map((tab) => tab.close()));
  });

  it("opens a job's log at its newest line and keeps it there while following, unless the reader scrolled up", async () => {
    const page = await browser.newPage();
    await page.goto(`${url}/view/runs/${runId}`);
    await page.waitForFunction(() => document.getElementById('live-state')?.textContent === 'live');
    const log = 'article.job pre.log';
    const atBottom = () =>
      page.$eval(log, (pre) => pre.scrollHeight > pre.clientHeight && pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4);
    expect(await page.$eval(log, (pre) => pre.textContent!.trimEnd().split('\n').at(-1))).toBe('step 200/900 loss 0.0050');
    expect(await atBottom()).toBe(true);
    appendLog(201, 230);
    await page.waitForFunction((sel) => document.querySelector(sel)!.textContent!.includes('step 230/900'), { timeout: 15_000 }, log);
    expect(await atBottom()).toBe(true);
    await page.$eval(log, (pre) => void (pre.scrollTop = 0));
    appendLog(231, 260);
    await page.waitForFunction((sel) => document.querySelector(sel)!.textContent!.includes('step 260/900'), { timeout: 15_000 }, log);
    expect(await page.$eval(log, (pre) => pre.scrollTop)).toBe(0);
  });
});
