import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { requireWorkspaceFilesystem, workspaceImage } from '../../sandbox/run-storage.js';
import {
  type CheckLimits,
  checkInProgress,
  checkLimits,
  IntegrityChecks,
  takeCheckLock,
  type UnfinishedCheck,
} from '../../src/integrity/background.js';
import { recordIncompleteContaminationCheck } from '../../src/integrity/check.js';
import { runIntegrity } from '../../src/integrity/verdict.js';
import { exportRun } from '../../src/reports/export.js';
import { buildLeaderboard, leaderboardHtml, leaderboardMarkdown, runResults } from '../../src/reports/leaderboard.js';
import { Store } from '../../src/store/store.js';
import { getTask } from '../../src/tasks/task.js';
import { tasksRoot } from '../../src/util/paths.js';
import { DiskAccounts } from '../../src/view/disk.js';
import { ViewData } from '../../src/view/data.js';
import { leaderboardPage } from '../../src/view/leaderboard-page.js';
import { runPage } from '../../src/view/run-page.js';
import { recordCheckVerdict } from '../helpers/integrity.js';
import { startHttpServer } from '../helpers/http-server.js';
import { call, startServer } from '../helpers/mcp.js';
import { parquetDictionaryBomb } from '../helpers/parquet-bomb.js';
import { tempDir } from '../helpers/sandbox.js';

/**
 * Verdicts are clean, flagged or incomplete, and only clean is clean (issue 46): a check whose process aborts, that its
 * server stops, or that never ran is incomplete, shown so in the report and the view, scored as flagged on the
 * leaderboard, and checked again by the next server to start.
 */

const task = getTask('micro-gsm8k');
const homes: string[] = [];
afterAll(() => homes.forEach((home) => rmSync(home, { recursive: true, force: true })));

/** An ended benchmark run of micro-gsm8k with a graded baseline (12) and one graded submission (private 40). */
function endedRun(store: Store, home: string, id: string, agent = 'agent-a'): string {
  const dir = join(home, 'runs', id);
  mkdirSync(join(dir, 'workspace', 'code'), { recursive: true });
  const createdAt = Date.now() - 60_000;
  store.insertRun({
    id,
    task_id: task.id,
    label: null,
    budget: JSON.stringify({ wallSeconds: 600, computeSeconds: 600, submissions: 2, rolloutEpisodes: 100 }),
    dir,
    sandbox: 'bwrap',
    grader_version: task.graderVersion,
    owner: '0-0',
    created_at: createdAt,
  });
  store.setRunAgent(id, { agent, driver_model: 'model-x' });
  store.insertEvent({ run_id: id, at: createdAt, t_rel_ms: 0, kind: 'tool', name: 'read_instructions', data: '{"arguments":{}}' });
  const inserted = store.insertSubmissionWithin(2, {
    run_id: id,
    path: 'output/final',
    note: null,
    content_hash: `hash-${id}`,
    files: 1,
    bytes: 10,
    created_at: createdAt + 1000,
  });
  if (!('inserted' in inserted)) throw new Error('seeding failed');
  grade(store, `hash-${id}`, 44, 40);
  store.setSubmissionState(inserted.inserted.id, 'graded', null, createdAt + 1500);
  store.endRun(id, 'test', createdAt + 2000);
  return join(dir, 'workspace');
}

function grade(store: Store, hash: string, publicScore: number, privateScore: number): void {
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
}

function newHome(): { home: string; store: Store } {
  const home = tempDir('verdicts');
  homes.push(home);
  const store = new Store(join(home, 'store.sqlite'));
  grade(store, task.baseModelHash, 10, 12);
  return { home, store };
}

function write(workspace: string, path: string, content: string | Buffer): void {
  mkdirSync(dirname(join(workspace, path)), { recursive: true });
  writeFileSync(join(workspace, path), content);
}

/** Ten hidden micro-gsm8k items verbatim: enough for a flag (no decoy found, p = 0.5^10). */
const leak = readFileSync(join(tasksRoot, 'micro-gsm8k', 'eval', 'private.jsonl'), 'utf8')
  .split('\n')
  .slice(0, 10)
  .join('\n');

/** Checks as the engine runs them: in their own process (under `limits`), an unfinished one recorded incomplete. */
function checksOf(home: string, store: Store, limits: Partial<CheckLimits> = {}): IntegrityChecks {
  return new IntegrityChecks(
    home,
    store.path,
    (runId, unfinished: UnfinishedCheck) => recordIncompleteContaminationCheck(store, runId, unfinished),
    { ...checkLimits, ...limits },
  );
}

describe('a check that did not finish is incomplete, never clean', () => {
  it('a check process that runs out of memory ends alone: incomplete with why, the next check runs, and it is ranked as its baseline', async () => {
    const { home, store } = newHome();
    // 40 MB of text on one line: the block read as a string (16 MiB) alone passes a 16 MiB heap, so V8 aborts the process.
    write(endedRun(store, home, 'bombed'), 'data/long.txt', 'word '.repeat(8 * 2 ** 20));
    write(endedRun(store, home, 'honest'), 'code/train.py', 'print("sft")\n');
    const starved = checksOf(home, store, { heapMb: 16 });
    starved.start('bombed');
    await starved.drain();
    const checks = checksOf(home, store);
    checks.start('honest');
    await checks.drain();

    const check = store.latestIntegrityCheck('bombed', 'contamination')!;
    expect(check.verdict).toBe('incomplete');
    expect(JSON.parse(check.details)).toEqual({
      interrupted: false,
      error: expect.stringMatching(/^the check's process was ended by SIG\w+: .*out of memory/),
    });
    expect(store.latestIntegrityCheck('honest', 'contamination')!.verdict).toBe('clean');
    expect(runIntegrity(store, 'bombed')).toMatchObject({
      verdict: 'incomplete',
      flagged: false,
      reasons: [expect.stringContaining('contamination check incomplete')],
    });

    // Ranked: the incomplete run scores its baseline (12), the clean one its 40; dropped, every figure is the clean run's.
    const results = runResults(store);
    expect(results.map((r) => [r.run_id, r.integrity])).toEqual([
      ['bombed', 'incomplete'],
      ['honest', 'clean'],
    ]);
    expect(buildLeaderboard(results)[0]).toMatchObject({ runs: 2, mean: 26, incomplete_runs: 1, flagged_runs: 0, success_rate: 0.5 });
    expect(buildLeaderboard(results, 'keep')[0]).toMatchObject({ runs: 2, mean: 40 });
    expect(buildLeaderboard(results, 'drop')[0]).toMatchObject({ runs: 1, mean: 40, ci_low: 40, ci_high: 40, success_rate: 1 });
    store.close();
  });

  it('the 130-byte Parquet bomb, and a check past its time, are incomplete, never clean', async () => {
    const { home, store } = newHome();
    write(endedRun(store, home, 'parquet-bomb'), 'data/bomb.parquet', parquetDictionaryBomb());
    write(endedRun(store, home, 'slow'), 'code/leak.jsonl', leak);
    const checks = checksOf(home, store);
    checks.start('parquet-bomb');
    await checks.drain();
    const hurried = checksOf(home, store, { timeMs: 1 });
    hurried.start('slow');
    await hurried.drain();
    expect(store.latestIntegrityCheck('parquet-bomb', 'contamination')!.verdict).toBe('incomplete');
    expect(runIntegrity(store, 'parquet-bomb').coverage!.unread).toContainEqual(
      expect.objectContaining({ path: 'workspace data/bomb.parquet', bytes: parquetDictionaryBomb().length }),
    );
    expect(store.latestIntegrityCheck('slow', 'contamination')).toMatchObject({ verdict: 'incomplete' });
    expect(JSON.parse(store.latestIntegrityCheck('slow', 'contamination')!.details)).toEqual({
      error: 'the check ran past 0.001 s and was stopped',
      interrupted: false,
    });
    store.close();
  });

  it('a run with a filesystem image is never read clean from its bare mount point: incomplete, what was missed named', async () => {
    const { home, store } = newHome();
    const workspace = endedRun(store, home, 'unmounted');
    write(workspace, 'code/train.py', 'print(1)\n');
    // Not an ext4 image: it cannot be mounted, and the bare folder under it must not stand in for it.
    writeFileSync(join(home, 'runs', 'unmounted', workspaceImage), '');
    const checks = checksOf(home, store);
    checks.start('unmounted');
    await checks.drain();
    expect(store.latestIntegrityCheck('unmounted', 'contamination')!.verdict).toBe('incomplete');
    expect(runIntegrity(store, 'unmounted').coverage!.unread).toContainEqual(expect.objectContaining({ path: 'workspace .' }));
    // Found opened: the folder is on the run folder's own device, so not the run's filesystem.
    const fd = openSync(workspace, 'r');
    try {
      expect(() => requireWorkspaceFilesystem(dirname(workspace), fd)).toThrow(/not mounted where it was read/);
      rmSync(join(home, 'runs', 'unmounted', workspaceImage));
      expect(() => requireWorkspaceFilesystem(dirname(workspace), fd)).not.toThrow();
    } finally {
      closeSync(fd);
    }
    store.close();
  });

  it('a check its server stops waiting for records its own verdict; a queued one never starts, and a run never checked reads incomplete', async () => {
    const { home, store } = newHome();
    for (const id of ['first', 'queued']) write(endedRun(store, home, id), 'code/leak.jsonl', leak);
    endedRun(store, home, 'never');
    const checks = checksOf(home, store);
    checks.start('first');
    checks.start('queued');
    await checks.drain(0);
    const verdict = (id: string) => store.latestIntegrityCheck(id, 'contamination')?.verdict;
    await expect.poll(() => verdict('first'), { timeout: 120_000, interval: 250 }).toBe('flagged');
    expect(verdict('queued')).toBeUndefined();
    expect(runIntegrity(store, 'queued')).toMatchObject({ verdict: 'incomplete', contamination: 'unchecked' });
    expect(runIntegrity(store, 'never')).toMatchObject({ verdict: 'incomplete', contamination: 'unchecked' });
    expect(runResults(store).find((r) => r.run_id === 'never')!.integrity).toBe('incomplete');
    store.close();
  });

  it('one check of a run at a time: a second finds the lock held and records nothing; a late incomplete never overrides a newer verdict', async () => {
    const { home, store } = newHome();
    const workspace = endedRun(store, home, 'locked');
    write(workspace, 'code/leak.jsonl', leak);
    const held = takeCheckLock(dirname(workspace))!;
    expect(checkInProgress(dirname(workspace))).toBe(true);
    const checks = checksOf(home, store);
    checks.start('locked');
    await checks.drain();
    expect(store.latestIntegrityCheck('locked', 'contamination')).toBeUndefined();
    held.close();
    expect(checkInProgress(dirname(workspace))).toBe(false);
    checks.start('locked');
    await checks.drain();
    expect(store.latestIntegrityCheck('locked', 'contamination')!.verdict).toBe('flagged');
    // A check that started before that verdict and ended after it without one: its incomplete row would be stale.
    recordIncompleteContaminationCheck(store, 'locked', {
      reason: "the check's process was killed",
      elapsedMs: 60_000,
      interrupted: false,
    });
    expect(store.latestIntegrityCheck('locked', 'contamination')!.verdict).toBe('flagged');
    store.close();
  });

  it("a stdio server its client leaves (stdin closed, then the SDK's TERM and KILL) still records its run's finished verdict", async () => {
    const home = tempDir('verdicts');
    homes.push(home);
    const client = await startServer({ home });
    expect((await call(client, 'write_file', { path: 'code/leak.jsonl', content: leak })).isError).toBe(false);
    await client.close();
    const latest = () => {
      const look = new Store(join(home, 'store.sqlite'));
      try {
        const check = look.latestIntegrityCheck(look.listRuns()[0]!.id, 'contamination');
        return check && { verdict: check.verdict, details: JSON.parse(check.details) as { interrupted?: boolean } };
      } finally {
        look.close();
      }
    };
    await expect.poll(latest, { timeout: 120_000, interval: 250 }).toMatchObject({ verdict: 'flagged' });
    expect(latest()!.details.interrupted).toBeUndefined();
  });

  it('a restarted server checks every ended run left unchecked or interrupted before it serves, and no other', async () => {
    const { home, store } = newHome();
    write(endedRun(store, home, 'unchecked'), 'code/leak.jsonl', leak);
    write(endedRun(store, home, 'interrupted'), 'code/leak.jsonl', leak);
    recordIncompleteContaminationCheck(store, 'interrupted', { reason: 'the server stopped', elapsedMs: 5, interrupted: true });
    write(endedRun(store, home, 'failed'), 'code/leak.jsonl', leak);
    recordIncompleteContaminationCheck(store, 'failed', { reason: "the check's process was killed", elapsedMs: 5, interrupted: false });
    store.close();

    const server = await startHttpServer(home);
    try {
      const verdicts = () => {
        const look = new Store(join(home, 'store.sqlite'));
        try {
          return ['unchecked', 'interrupted', 'failed'].map((id) => look.latestIntegrityCheck(id, 'contamination')?.verdict);
        } finally {
          look.close();
        }
      };
      await expect.poll(verdicts, { timeout: 120_000, interval: 250 }).toEqual(['flagged', 'flagged', 'incomplete']);
      expect(server.stderr()).toContain('checking a run whose check did not finish');
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });
  it('a server killed (SIGKILL) mid-check, its check killed with it as a crash kills both, checks the run again on restart', async () => {
    const { home, store } = newHome();
    const runId = `killed-${randomBytes(4).toString('hex')}`;
    const workspace = endedRun(store, home, runId);
    write(workspace, 'code/leak.jsonl', leak);
    // An honest file big enough that its check runs for seconds: it is caught running, whatever the machine's speed.
    const line = Buffer.from('{"text": "an honest line of training text about the weather and the sea"}\n'.repeat(4096));
    const big = openSync(join(workspace, 'data.jsonl'), 'w');
    for (let written = 0; written < 256 * 2 ** 20; written += line.length) writeSync(big, line);
    closeSync(big);
    store.close();
    const verdict = () => {
      const look = new Store(join(home, 'store.sqlite'));
      try {
        return look.latestIntegrityCheck(runId, 'contamination');
      } finally {
        look.close();
      }
    };

    const server = await startHttpServer(home);
    // The check of the unchecked run, in its own process (its command line names the run).
    const checking = () =>
      readdirSync('/proc').filter((pid) => {
        try {
          const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
          return argv.some((arg) => arg.endsWith('check-process.js')) && argv.includes(runId);
        } catch {
          return false; // not a process, or gone while we looked
        }
      });
    await expect.poll(() => checking().length, { timeout: 60_000, interval: 50 }).toBe(1);
    const [check] = checking();
    server.child.kill('SIGKILL');
    await server.exited;
    process.kill(Number(check), 'SIGKILL');
    await expect.poll(() => checking().length, { timeout: 10_000, interval: 50 }).toBe(0);
    // Killed mid-check: nothing recorded, so the run reads incomplete, never clean.
    expect(verdict()).toBeUndefined();

    // The next check need not read the big file again to be seen recording.
    rmSync(join(workspace, 'data.jsonl'));
    const restarted = await startHttpServer(home);
    try {
      await expect.poll(() => verdict()?.verdict, { timeout: 120_000, interval: 250 }).toBe('flagged');
      expect(restarted.stderr()).toContain('checking a run whose check did not finish');
    } finally {
      restarted.child.kill('SIGTERM');
      await restarted.exited;
    }
  });
});

describe('stores from before', () => {
  it("read a contamination check recorded 'failed' as incomplete, and keep a review's 'failed'", () => {
    const { home, store } = newHome();
    endedRun(store, home, 'old');
    // The table as schema 9 made it, with a failed check and a failed review, then the upgrade.
    store.db.exec(`DROP TABLE integrity_checks;
      CREATE TABLE integrity_checks (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id),
        kind TEXT NOT NULL CHECK (kind IN ('contamination', 'review')),
        verdict TEXT NOT NULL CHECK (verdict IN ('clean', 'suspect', 'flagged', 'failed')),
        checker TEXT NOT NULL, details TEXT NOT NULL, duration_ms INTEGER NOT NULL, created_at INTEGER NOT NULL);
      INSERT INTO integrity_checks (run_id, kind, verdict, checker, details, duration_ms, created_at) VALUES
        ('old', 'contamination', 'failed', 'contamination/2', '{"error":"the worker exited with code 1"}', 5, 0),
        ('old', 'review', 'failed', 'judge', '{}', 5, 0);`);
    store.db.pragma('user_version = 9');
    store.close();
    const upgraded = new Store(join(home, 'store.sqlite'));
    expect(upgraded.schemaVersion).toBe(12);
    expect(upgraded.latestIntegrityCheck('old', 'contamination')!.verdict).toBe('incomplete');
    expect(upgraded.latestIntegrityCheck('old', 'review')!.verdict).toBe('failed');
    expect(runIntegrity(upgraded, 'old').verdict).toBe('incomplete');
    upgraded.close();
  });

  it('read a clean verdict of an older checker as incomplete, with how to check again', () => {
    const { home, store } = newHome();
    endedRun(store, home, 'outdated');
    store.insertIntegrityCheck({
      run_id: 'outdated',
      kind: 'contamination',
      verdict: 'clean',
      checker: 'contamination/2',
      details: JSON.stringify({ matched: 0, coverage: { files: 1, bytes: 100 } }),
      duration_ms: 1,
      created_at: 0,
    });
    expect(runIntegrity(store, 'outdated')).toMatchObject({
      verdict: 'incomplete',
      reasons: [expect.stringContaining('checked by an older checker (contamination/2); re-run `a2rl runs check outdated`')],
    });
    store.close();
  });
});

describe('the verdict is shown: the report, the view, the leaderboard and its mode', () => {
  it('the report and the run page show the verdict, what was read and what was not; the leaderboard pages name their mode', async () => {
    const { home, store } = newHome();
    const workspace = endedRun(store, home, 'partly-read');
    write(workspace, 'code/train.py', 'print("sft")\n');
    // A Parquet file declaring more rows than its bytes hold: refused unread, and far more than the share the check may leave unread.
    write(workspace, 'data/train.parquet', parquetDictionaryBomb());
    const clean = endedRun(store, home, 'clean-run', 'agent-b');
    recordCheckVerdict(store, 'clean-run');
    expect(clean).toContain('clean-run');
    const checks = checksOf(home, store);
    checks.start('partly-read');
    await checks.drain();
    const integrity = runIntegrity(store, 'partly-read');
    expect(integrity).toMatchObject({ verdict: 'incomplete', contamination: 'incomplete' });
    expect(integrity.coverage!.unread).toContainEqual(expect.objectContaining({ path: 'workspace data/train.parquet', bytes: 130 }));

    const out = tempDir('verdicts-export');
    homes.push(out);
    exportRun(store, 'partly-read', out);
    const report = readFileSync(join(out, 'report.html'), 'utf8');
    expect(report).toContain('<b>Incomplete</b>');
    expect(report).toMatch(/Read: \d+ files/);
    expect(report).toContain('<code>workspace data/train.parquet</code> (130 B)');
    expect(JSON.parse(readFileSync(join(out, 'integrity.json'), 'utf8'))).toMatchObject({ verdict: 'incomplete' });

    const view = new ViewData(store, new DiskAccounts(2 ** 30));
    const page = (await runPage(view, 'partly-read'))!;
    expect(page).toContain('<h2 id="h-integrity">Integrity</h2>');
    expect(page).toContain('<b>Incomplete</b>');
    expect(page).toContain('<code>workspace data/train.parquet</code>');
    expect(await runPage(view, 'clean-run')).toContain('Integrity: <b>clean</b>');

    const rows = buildLeaderboard(runResults(store), 'drop');
    expect(leaderboardHtml(rows, 'drop')).toContain('are left out: every figure of a row');
    expect(leaderboardMarkdown(rows, 'keep')).toContain('(--flagged keep)');
    expect(leaderboardPage(view)).toContain('(--flagged baseline)');
    store.close();
  });
});
