import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashDirectory } from '../../src/util/hashing.js';
import { prepareDocker } from '../helpers/docker.js';
import { call, waitJob } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import { attack, makeCheckpoint, recordFigure, runToEnd, sleep, stdioRun, withStore } from './harness.js';

/**
 * The server runs as root and works on the agent's workspace from outside the sandbox, where
 * every folder below the root is the agent's to rename, swap or nest. These attacks use the
 * tools alone (and the agent's own jobs in its sandbox) to make the server read, list, create
 * or charge something outside the workspace. Every backend is attacked: bubblewrap always,
 * Docker where an engine can be had (CI requires it).
 */
const dockerReady = prepareDocker().then((why) => why === undefined);

/** Seconds each race is driven for. */
const raceSeconds = 30;

/**
 * A job that swaps each pair (a real folder and a link to a host path) with
 * renameat2(RENAME_EXCHANGE) as fast as it can until `until` (epoch milliseconds; the
 * sandbox shares the host's clock), so that a check and a later open by name see
 * different things.
 */
const swapperScript = (pairs: Array<[string, string]>, until: number) => `python3 - <<'EOF'
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
pairs = ${JSON.stringify(pairs)}
end = ${until / 1000}
swaps = 0
while time.time() < end:
    for a, b in pairs:
        if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0:
            swaps += 1
print('swaps', swaps)
EOF`;

describe.each(['bwrap', 'docker'])('red team, the server on paths the agent controls (%s)', (backend) => {
  const home = tempDir('rt-paths');
  /** Host folders an attack points its links at; nothing may be read, listed or created there. */
  const secretDir = tempDir('rt-paths-secret');
  const outsideDir = tempDir('rt-paths-outside');
  const marker = `secret-${Date.now()}`;
  let client: Client;
  let workspace: string;
  let runId: string;
  let skip = false;
  /** Every error text an agent was shown during these attacks. */
  const messages: string[] = [];
  const callTool = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await call(client, name, args);
    if (result.isError) messages.push(result.text);
    return result;
  };
  const submittedHashes = () =>
    withStore(home, (store) =>
      (store.db.prepare('SELECT content_hash FROM submissions WHERE run_id = ?').all(runId) as Array<{ content_hash: string }>).map(
        (row) => row.content_hash,
      ),
    );

  beforeAll(async () => {
    if (backend === 'docker' && !(await dockerReady)) {
      skip = true;
      return;
    }
    writeFileSync(join(secretDir, marker), `${marker}\n`);
    ({ client, runId, workspace } = await stdioRun(home, backend, {
      budget: 'submissions=20,episodes=200',
      // The disk walk's own defences (paths past its depth, trees swapped under it), as hosts without loop devices have
      // them; where the kernel holds the quota, test/redteam/disk-quota.test.ts.
      serverArgs: ['--disk-quota', '40', '--storage', 'walk'],
    }));
    // Another run's stored checkpoint, planted where the server keeps submissions: the prize of every attack below.
    await makeCheckpoint(client, 'output/victim', 1.02);
    cpSync(join(workspace, 'output', 'victim'), join(home, 'submissions', 'planted'), { recursive: true });
    rmSync(join(workspace, 'output', 'victim'), { recursive: true });
    await makeCheckpoint(client, 'output/legit', 1.01);
  }, 600_000);

  afterAll(async () => {
    await client?.close();
    // No error an agent saw names a host path.
    for (const text of messages) expect(text, text).not.toContain(home);
  });

  const planted = () => join(home, 'submissions', 'planted');

  it('never submits another run’s stored checkpoint, whatever path leads to it', async (context) => {
    if (skip) return context.skip();
    await attack('server-paths', 'planted checkpoint', backend, async () => {
      const setup = await callTool('exec', {
        command: [
          `ln -s ${planted()} output/to-planted`,
          `mkdir -p output/file-links && for f in config.json model.pt; do ln -s ${planted()}/$f output/file-links/$f; done`,
          `ln -s /proc/1/root${planted()} output/via-proc`,
          `mkdir -p output/nested && ln -s ${planted()} output/nested/ckpt`,
        ].join(' && '),
      });
      expect(setup.isError, setup.text).toBe(false);
      for (const path of [
        'output/to-planted',
        'output/file-links',
        'output/via-proc',
        'output/nested/ckpt',
        `../../submissions/planted`,
        `/workspace/../submissions/planted`,
        planted(),
      ]) {
        const result = await callTool('submit_artifact', { path });
        expect(result.isError, `${path}: ${result.text}`).toBe(true);
        expect(result.text).toMatch(/^\[(OUTSIDE_WORKSPACE|INVALID_INPUT|NOT_FOUND)\]/);
      }
      expect(submittedHashes()).toEqual([]);
    });
  });

  it(`races submit_artifact, list_files and write_file against a folder swapper for ${raceSeconds} s: nothing outside is taken, listed or created`, async (context) => {
    if (skip) return context.skip();
    await attack('server-paths', 'folder-swap race', backend, async () => {
      const setup = await callTool('exec', {
        command: [
          'cp -r output/legit output/race',
          `ln -s ${planted()} output/race-link`,
          'mkdir -p output/lsdir/sub',
          `ln -s ${secretDir} output/lsdir-link`,
          'mkdir -p output/wdir',
          `ln -s ${outsideDir} output/wdir-link`,
        ].join(' && '),
      });
      expect(setup.isError, setup.text).toBe(false);
      const legit = await callTool('submit_artifact', { path: 'output/legit' });
      expect(legit.isError, legit.text).toBe(false);
      const legitHash = legit.structured.content_hash as string;
      const pairs: Array<[string, string]> = [
        ['output/race', 'output/race-link'],
        ['output/lsdir', 'output/lsdir-link'],
        ['output/wdir', 'output/wdir-link'],
      ];
      const until = Date.now() + 2000 + raceSeconds * 1000;
      // The swapper keeps the disk account's walks from seeing every folder, and the budget check stops a job on
      // any walk it could not finish (invariant 11): that stop, the defence working, can come at any second and
      // leave a pair as a link for the rest of the race. So a stopped swapper is started again until the race ends.
      const swappers: string[] = [];
      const keepSwapping = async () => {
        while (Date.now() < until - 1000) {
          const swapper = await callTool('run_training', { command: swapperScript(pairs, until) });
          if (swapper.isError) {
            // A start measures afresh: refused only while that walk still sees swaps (a stopped swapper not yet gone).
            expect(swapper.text).toMatch(/^\[QUOTA_EXCEEDED\]/);
            await sleep(200);
            continue;
          }
          swappers.push((await waitJob(client, swapper.structured.job_id, 120)).state);
        }
      };
      const swapping = keepSwapping();
      await sleep(2000);
      const outcomes: Record<string, number> = {};
      const count = (tool: string, result: { isError: boolean; text: string }) => {
        const key = `${tool} ${result.isError ? (result.text.match(/^\[(\w+)\]/)?.[1] ?? 'error') : 'ok'}`;
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      };
      const loop = async (body: (i: number) => Promise<void>) => {
        for (let i = 0; Date.now() < until; i++) await body(i);
      };
      // Settled, not all: a failed branch must not leave the others calling tools into the next test.
      const branches = await Promise.allSettled([
        swapping,
        loop(async () => {
          const result = await callTool('submit_artifact', { path: 'output/race' });
          count('submit_artifact', result);
          if (!result.isError) expect(result.structured.content_hash).toBe(legitHash);
        }),
        loop(async () => {
          for (const [path, depth] of [
            ['output/lsdir', 1],
            ['output', 3],
          ] as const) {
            const result = await callTool('list_files', { path, depth });
            count('list_files', result);
            expect(result.text).not.toContain(marker);
          }
        }),
        loop(async (i) => {
          const result = await callTool('write_file', { path: `output/wdir/sub${i % 3}/new-${i}.txt`, content: 'x' });
          count('write_file', result);
        }),
      ]);
      for (const branch of branches) if (branch.status === 'rejected') throw branch.reason;
      recordFigure({ kind: 'race', backend, seconds: raceSeconds, outcomes, swappers });
      // Each swapper swapped until the race ended or the disk check stopped it; one that failed swapped nothing.
      expect(swappers.length).toBeGreaterThan(0);
      expect(
        swappers.filter((state) => state !== 'succeeded' && state !== 'budget_stopped'),
        String(swappers),
      ).toEqual([]);
      // The tool shows a hash's first 16 characters; the store keeps it whole.
      expect(submittedHashes().filter((hash) => !hash.startsWith(legitHash))).toEqual([]);
      expect(submittedHashes()).not.toContain(hashDirectory(planted()));
      expect(readdirSync(outsideDir)).toEqual([]);
      expect(readdirSync(secretDir)).toEqual([marker]);
      expect(Object.keys(outcomes).filter((key) => key.endsWith('INTERNAL'))).toEqual([]);
      // Each tool also succeeded during the race (not refused throughout): the race was really run against it.
      for (const tool of ['submit_artifact', 'list_files', 'write_file'])
        expect(outcomes[`${tool} ok`], JSON.stringify(outcomes)).toBeGreaterThan(0);
    });
  }, 240_000);

  it('snapshots a code/ that is a link to a host folder as skipped: nothing outside is stored or exported', async (context) => {
    if (skip) return context.skip();
    await attack('server-paths', 'symlinked code/', backend, async () => {
      await callTool('exec', { command: `mv code code-real && ln -s ${secretDir} code` });
      await runToEnd(client, 'true');
      const snapshots = withStore(home, (store) =>
        (store.db.prepare("SELECT data FROM events WHERE run_id = ? AND kind = 'snapshot'").all(runId) as Array<{ data: string }>).map(
          (row) => JSON.parse(row.data),
        ),
      );
      const last = snapshots.at(-1);
      expect(last.files).toBe(0);
      expect(last.skipped[0].path).toBe('code');
      const objects = join(home, 'code-snapshots', 'objects');
      const stored = existsSync(objects) ? readdirSync(objects).map((name) => readFileSync(join(objects, name), 'utf8')) : [];
      expect(stored.some((content) => content.includes(marker))).toBe(false);
      await callTool('exec', { command: 'rm code && mv code-real code' });
    });
  });

  it('charges every requested episode when the batch file is a link, and keeps no copy through it', async (context) => {
    if (skip) return context.skip();
    await attack('server-paths', 'symlinked rollout batch', backend, async () => {
      const before = (await callTool('budget_status')).structured.rollout_episodes.used as number;
      const batches = (await callTool('exec', { command: 'ls rollouts | wc -l' })).structured.output.trim();
      const next = `rollouts/batch-${String(Number(batches) + 1).padStart(3, '0')}.jsonl`;
      await callTool('exec', { command: `mkdir -p rollouts && ln -s /tmp/elsewhere.jsonl ${next}` });
      const started = await callTool('launch_rollouts', { checkpoint: 'models/base', episodes: 8, group_size: 4 });
      expect(started.isError, started.text).toBe(false);
      const job = await waitJob(client, started.structured.job_id, 300);
      expect(job.state).toBe('succeeded');
      const after = (await callTool('budget_status')).structured.rollout_episodes.used as number;
      expect(after - before).toBe(8);
      const batch = withStore(home, (store) =>
        (
          store.db.prepare("SELECT data FROM events WHERE run_id = ? AND kind = 'rollouts' AND name = 'batch'").all(runId) as Array<{
            data: string;
          }>
        ).map((row) => JSON.parse(row.data)),
      ).at(-1);
      expect(batch.unreadable).toMatch(/symlink/);
      expect(batch.trajectories).toBeNull();
    });
  }, 360_000);

  it('counts what lies under paths past 4,096 bytes and nests past its walk, failing closed', async (context) => {
    if (skip) return context.skip();
    await attack('server-paths', 'deep paths and the disk account', backend, async () => {
      const long = 'd'.repeat(200);
      // 25 levels of 200-byte names: 5,000 bytes of path, then 60 MiB under it, against a 40 MiB quota. The budget
      // check may stop the exec while it writes (it counts what lies down there): either way the data is counted.
      const deep = await callTool('exec', {
        command: `python3 -c "import os\nos.chdir('output')\nfor _ in range(25): os.mkdir('${long}'); os.chdir('${long}')\nopen('weights', 'wb').write(os.urandom(60 * 2**20))"`,
      });
      expect(deep.structured.exit_code === 0 || /disk quota/.test(deep.text), deep.text).toBe(true);
      const refused = await callTool('run_training', { command: 'true' });
      expect(refused.text).toMatch(/^\[QUOTA_EXCEEDED\].*\d+ MiB/s);
      expect((await callTool('budget_status')).structured.disk_bytes.used).toBeGreaterThan(40 * 2 ** 20);
      // Over the quota, an exec that deletes is left to finish, however long it takes: a reading that caught up with
      // the writer above is no growth of its own.
      const removed = await callTool('exec', { command: `sleep 3; rm -rf output/${long} && echo removed` });
      expect(removed.structured.output, removed.text).toContain('removed');
      // Nested past the walk's depth: counted as over the quota, whatever it holds.
      const nested = await callTool('exec', {
        command: `python3 -c "import os\nos.chdir('output')\nfor _ in range(300): os.mkdir('n'); os.chdir('n')" && echo ok`,
      });
      expect(nested.structured.output, nested.text).toContain('ok');
      const unmeasured = await callTool('run_training', { command: 'true' });
      expect(unmeasured.text).toMatch(/^\[QUOTA_EXCEEDED\].*cannot be measured/s);
      await callTool('exec', { command: 'rm -rf output/n' });
      await runToEnd(client, 'true');
      // A path the kernel could never take is refused with what to do, not an internal error.
      const tooLong = await callTool('write_file', { path: `output/${'x/'.repeat(2100)}f.txt`, content: 'x' });
      expect(tooLong.text).toMatch(/^\[INVALID_INPUT\].*at most 4096/s);
      const longName = await callTool('write_file', { path: `output/${'y'.repeat(300)}`, content: 'x' });
      expect(longName.text).toMatch(/^\[INVALID_INPUT\].*255 bytes/s);
    });
  }, 300_000);

  it('lists, snapshots and refuses to submit names that are not UTF-8, with what to do', async (context) => {
    if (skip) return context.skip();
    await attack('server-paths', 'names that are not UTF-8', backend, async () => {
      const made = await callTool('exec', {
        command: 'cp -r output/legit output/odd && touch "output/odd/$(printf \'bad\\377\')" "code/$(printf \'x\\376\')" && echo ok',
      });
      expect(made.structured.output, made.text).toContain('ok');
      const listed = await callTool('list_files', { path: 'output/odd' });
      expect(listed.isError, listed.text).toBe(false);
      expect(listed.structured.unlisted_names).toBe(1);
      const submitted = await callTool('submit_artifact', { path: 'output/odd' });
      expect(submitted.text).toMatch(/^\[INVALID_INPUT\].*not valid UTF-8.*rename/s);
      await runToEnd(client, 'true');
      const snapshot = withStore(home, (store) =>
        (store.db.prepare("SELECT data FROM events WHERE run_id = ? AND kind = 'snapshot'").all(runId) as Array<{ data: string }>)
          .map((row) => JSON.parse(row.data))
          .at(-1),
      );
      expect(snapshot.error).toBeUndefined();
      expect(snapshot.skipped).toContainEqual({ path: '.', reason: '1 names that are not valid UTF-8' });
    });
  });
});
