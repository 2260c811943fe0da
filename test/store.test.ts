import { closeSync, mkdirSync, openSync, readdirSync, readSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../src/util/paths.js';
import { type SnapshotLimits, snapshotDirectory as snapshotFolder } from '../src/store/submission-snapshots.js';
import { SafeDir } from '../src/util/safe-fs.js';
import { maxLogFrames, Store } from '../src/store/store.js';
import { tempDir } from './helpers/sandbox.js';

function newRun(store: Store, id: string): void {
  store.insertRun({
    id,
    task_id: 'micro-gsm8k',
    label: null,
    grader_version: 'test',
    owner: 'test',
    budget: '{}',
    dir: '/tmp/x',
    sandbox: 'bwrap',
    created_at: Date.now(),
  });
}

describe('store', () => {
  it('migrates once, in WAL mode, and keeps what was written across reopening', () => {
    const path = join(tempDir('store'), 'store.sqlite');
    const first = new Store(path);
    expect(first.schemaVersion).toBe(12);
    expect(first.db.pragma('journal_mode', { simple: true })).toBe('wal');
    newRun(first, 'r1');
    first.insertEvent({ run_id: 'r1', at: 1, t_rel_ms: 0, kind: 'tool', name: 'exec', data: '{}' });
    first.close();
    const second = new Store(path);
    expect(second.schemaVersion).toBe(12);
    expect(second.listEvents('r1')).toHaveLength(1);
    second.close();
  });

  it('checkpoints the write-ahead log from a worker thread, not inside a commit, when serving', async () => {
    const path = join(tempDir('store'), 'store.sqlite');
    const store = new Store(path);
    try {
      store.checkpointInBackground();
      newRun(store, 'r1');
      const fileBefore = statSync(path).size;
      const data = JSON.stringify({ result: 'x'.repeat(400) });
      for (let i = 0; i < 3000; i++) store.insertEvent({ run_id: 'r1', at: i, t_rel_ms: i, kind: 'tool', name: 'exec', data });
      // Over 1000 log pages: SQLite's own checkpoint would have run inside one of those commits.
      expect(statSync(`${path}-wal`).size).toBeGreaterThan(1000 * 4096);
      expect(statSync(path).size).toBe(fileBefore);
      const deadline = Date.now() + 60_000;
      // The events' 1.2 MB reach the database file without this thread checkpointing.
      const folded = () => statSync(path).size > fileBefore + 3000 * 400;
      while (!folded() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(folded()).toBe(true);
      expect(store.listEvents('r1')).toHaveLength(3000);
    } finally {
      store.close();
    }
  });

  it('reads a run again once it changed, through this store or another process, and never hands out a row to edit', () => {
    const path = join(tempDir('store'), 'store.sqlite');
    const store = new Store(path);
    const other = new Store(path);
    try {
      newRun(store, 'r1');
      newRun(store, 'r2');
      const before = store.getRun('r1')!;
      expect(before.state).toBe('active');
      expect(store.getRun('r1')).toBe(before);
      expect(() => ((before as { state: string }).state = 'ended')).toThrow(TypeError);
      store.setRunAgent('r1', { agent: 'claude-code' });
      expect(store.getRun('r1')!.agent).toBe('claude-code');
      // Another connection's commit (e.g. `a2rl runs revoke`) is seen at the next read.
      other.endRun('r2', 'revoked by the operator', Date.now());
      expect(store.getRun('r2')).toMatchObject({ state: 'ended', end_reason: 'revoked by the operator' });
      store.endRun('r1', 'done', Date.now());
      expect(store.getRun('r1')!.state).toBe('ended');
      expect(store.getRun('nope')).toBeUndefined();
    } finally {
      other.close();
      store.close();
    }
  });

  it('returns the earlier submission for identical content and refuses past the cap', () => {
    const store = new Store(join(tempDir('store'), 'store.sqlite'));
    newRun(store, 'r1');
    const submit = (hash: string) =>
      store.insertSubmissionWithin(3, {
        run_id: 'r1',
        path: 'output/x',
        note: null,
        content_hash: hash,
        files: 2,
        bytes: 10,
        created_at: Date.now(),
      });
    const outcomes = ['a', 'b', 'a', 'c', 'd', 'e'].map(submit);
    expect(outcomes.map((o) => Object.keys(o)[0])).toEqual(['inserted', 'inserted', 'existing', 'inserted', 'capReached', 'capReached']);
    expect(store.usage('r1').submissions).toBe(3);
    store.close();
  });

  it('is never seen half-made: processes creating the same new stores at once all open them, and leave no draft', async () => {
    const folder = tempDir('store-born');
    // Each process opens the same 20 new stores in the same order, so that they meet on every one as it is created.
    const script = `
      const { Store } = await import(${JSON.stringify(join(packageRoot, 'dist/src/store/store.js'))});
      for (let i = 0; i < 20; i++) new Store(${JSON.stringify(folder)} + '/s' + i + '.sqlite').close();`;
    const exits = await Promise.all(
      [0, 1, 2, 3].map(
        () =>
          new Promise<string>((resolve) => {
            const child = spawn(process.execPath, ['--input-type=module', '-e', script]);
            let err = '';
            child.stderr.on('data', (chunk) => (err += chunk));
            child.once('exit', (code) => resolve(`${code} ${err}`.trim()));
          }),
      ),
    );
    expect(exits).toEqual(['0', '0', '0', '0']);
    expect(readdirSync(folder).filter((name) => name.endsWith('.sqlite'))).toHaveLength(20);
    expect(readdirSync(folder).filter((name) => name.includes('.new'))).toEqual([]);
  });

  it('never lets submissions racing from several processes past the cap', async () => {
    const path = join(tempDir('store'), 'store.sqlite');
    const store = new Store(path);
    newRun(store, 'r1');
    // Four processes submit at once through the built store (the same code the server runs).
    const script = (worker: number) => `
      const { Store } = await import(${JSON.stringify(join(packageRoot, 'dist/src/store/store.js'))});
      const store = new Store(${JSON.stringify(path)});
      let inserted = 0;
      for (let i = 0; i < 25; i++) {
        const outcome = store.insertSubmissionWithin(7, { run_id: 'r1', path: 'x', note: null, content_hash: 'w${worker}-' + i, files: 1, bytes: 1, created_at: Date.now() });
        if ('inserted' in outcome) inserted++;
      }
      console.log(inserted);`;
    const counts = await Promise.all(
      [0, 1, 2, 3].map(
        (worker) =>
          new Promise<number>((resolve, reject) => {
            const child = spawn(process.execPath, ['--input-type=module', '-e', script(worker)]);
            let out = '';
            child.stdout.on('data', (chunk) => (out += chunk));
            child.once('exit', (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`worker exited ${code}`))));
          }),
      ),
    );
    expect(counts.reduce((a, b) => a + b, 0)).toBe(7);
    expect(store.listSubmissions('r1')).toHaveLength(7);
    store.close();
  });

  it('charges CPU-seconds for CPU jobs, GPU-seconds for GPU jobs, and nothing for grading', () => {
    const store = new Store(join(tempDir('store'), 'store.sqlite'));
    newRun(store, 'r1');
    const job = (kind: 'training' | 'grading', charged: number) =>
      store.insertJob(
        { run_id: 'r1', kind, command: 'x', resources: '{}', charged, episodes_requested: 0, owner: 'o', created_at: 0 },
        '/tmp',
      ).id;
    store.updateJobUsage(job('training', 1), 30, 0);
    store.updateJobUsage(job('training', 1), 500, 40);
    store.updateJobUsage(job('grading', 0), 100, 0);
    expect(store.usage('r1').computeSeconds).toBe(70);
    store.close();
  });

  it('sums the usage of a run again after every write that changes it, through this store or another connection', () => {
    const path = join(tempDir('store'), 'store.sqlite');
    const store = new Store(path);
    const other = new Store(path);
    try {
      newRun(store, 'r1');
      const job = (through: Store, kind: 'training' | 'rollouts', episodes = 0) =>
        through.insertJob(
          { run_id: 'r1', kind, command: 'x', resources: '{}', charged: 1, episodes_requested: episodes, owner: 'o', created_at: 0 },
          '/tmp',
        ).id;
      const submit = (through: Store, hash: string) =>
        through.insertSubmissionWithin(5, { run_id: 'r1', path: 'p', note: null, content_hash: hash, files: 1, bytes: 1, created_at: 0 });
      const ended = { reason: null, exit_code: 0, signal: null, gpu_s: 0, result: null, ended_at: 1 };
      expect(store.usage('r1')).toEqual({ computeSeconds: 0, rolloutEpisodes: 0, submissions: 0 });
      expect(store.usage('r1')).toBe(store.usage('r1'));
      const training = job(store, 'training');
      store.updateJobUsage(training, 12, 0);
      expect(store.usage('r1').computeSeconds).toBe(12);
      const rollouts = job(store, 'rollouts', 64);
      expect(store.usage('r1').rolloutEpisodes).toBe(64);
      store.finishJob(rollouts, { ...ended, state: 'succeeded', cpu_s: 3, episodes_done: 40 });
      expect(store.usage('r1')).toEqual({ computeSeconds: 15, rolloutEpisodes: 40, submissions: 0 });
      submit(store, 'a');
      expect(store.runStatus('r1')!.usage.submissions).toBe(1);
      // Another connection's writes (another server on this home) are seen at the next read.
      submit(other, 'b');
      other.updateJobUsage(job(other, 'training'), 5, 0);
      expect(store.runStatus('r1')!.usage).toEqual({ computeSeconds: 20, rolloutEpisodes: 40, submissions: 2 });
      other.endRun('r1', 'done', 2);
      expect(store.runStatus('r1')!.row.state).toBe('ended');
      expect(() => ((store.usage('r1') as { submissions: number }).submissions = 0)).toThrow(TypeError);
    } finally {
      other.close();
      store.close();
    }
  });

  it('keeps the write-ahead log bounded under steady writes: the checkpointer starts it over', async () => {
    const path = join(tempDir('store'), 'store.sqlite');
    const store = new Store(path);
    try {
      store.checkpointInBackground();
      newRun(store, 'r1');
      const data = JSON.stringify({ result: 'x'.repeat(400) });
      // Commits one after another, as under a load of tool calls: a passive checkpoint alone never reaches the log's end
      // then, and SQLite never starts the log over.
      let commits = 0;
      const write = (n: number) => {
        for (let i = 0; i < n; i++, commits++) store.insertEvent({ run_id: 'r1', at: i, t_rel_ms: i, kind: 'tool', name: 'exec', data });
      };
      const walFrames = () => statSync(`${path}-wal`).size / (4096 + 24);
      // The log's header counts the times it was started over (its checkpoint sequence number, bytes 12-15).
      const restarts = () => {
        const header = Buffer.alloc(4);
        const fd = openSync(`${path}-wal`, 'r');
        readSync(fd, header, 0, 4, 12);
        closeSync(fd);
        return header.readUInt32BE(0);
      };
      while (walFrames() < maxLogFrames) write(500);
      const before = restarts();
      const deadline = Date.now() + 30_000;
      while (restarts() === before && Date.now() < deadline) {
        write(10);
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
      expect(restarts()).toBeGreaterThan(before);
      expect(store.listEvents('r1')).toHaveLength(commits);
    } finally {
      store.close();
    }
  });
});

describe('submission snapshots', () => {
  const limits = { maxFiles: 4, maxBytes: 1000, required: [['config.json'], ['model.pt']], holds: 'config.json and model.pt' };
  const hfLimits = { ...limits, required: [['config.json', 'adapter_config.json']], holds: 'a model or an adapter' };

  function checkpoint(files: Record<string, string>): string {
    const dir = tempDir('ckpt');
    for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
    return dir;
  }

  /** Snapshots a folder as the server does: through a handle on it. */
  function snapshotDirectory(dir: string, shown: string, storeDir: string, snapshotLimits: SnapshotLimits) {
    const folder = SafeDir.openTrusted(dir, shown);
    return snapshotFolder(folder, shown, storeDir, snapshotLimits).finally(() => folder.close());
  }

  it('hashes content, not location or time, and locks the copy', async () => {
    const storeDir = tempDir('subs');
    const a = await snapshotDirectory(checkpoint({ 'config.json': '{}', 'model.pt': 'w' }), 'output/a', storeDir, limits);
    const b = await snapshotDirectory(checkpoint({ 'config.json': '{}', 'model.pt': 'w' }), 'output/b', storeDir, limits);
    const c = await snapshotDirectory(checkpoint({ 'config.json': '{}', 'model.pt': 'v' }), 'output/c', storeDir, limits);
    expect(a.contentHash).toBe(b.contentHash);
    expect(c.contentHash).not.toBe(a.contentHash);
    expect(readdirSync(storeDir).sort()).toEqual([a.contentHash, c.contentHash].sort());
    expect(statSync(join(a.dir, 'model.pt')).mode & 0o222).toBe(0);
  });

  it.each([
    ['an empty folder', {}, /is empty/],
    ['a folder without the weights', { 'config.json': '{}' }, /lacks model\.pt/],
    ['too many bytes', { 'config.json': '{}', 'model.pt': 'x'.repeat(2000) }, /more than 4 files or 1000 bytes/],
  ])('refuses %s and stores nothing', async (_, files, message) => {
    const storeDir = tempDir('subs');
    await expect(snapshotDirectory(checkpoint(files), 'output/x', storeDir, limits)).rejects.toThrow(message);
    expect(readdirSync(storeDir)).toEqual([]);
  });

  it('takes either name of a choice, and names both when neither is there', async () => {
    const storeDir = tempDir('subs');
    const adapter = await snapshotDirectory(
      checkpoint({ 'adapter_config.json': '{}', 'adapter_model.safetensors': 'w' }),
      'output/a',
      storeDir,
      hfLimits,
    );
    expect(adapter.files).toBe(2);
    await expect(snapshotDirectory(checkpoint({ 'model.safetensors': 'w' }), 'output/b', storeDir, hfLimits)).rejects.toThrow(
      /lacks config\.json or adapter_config\.json\. A checkpoint folder holds a model or an adapter/,
    );
  });

  it('refuses symlinks, even to real files', async () => {
    const storeDir = tempDir('subs');
    const dir = checkpoint({ 'config.json': '{}' });
    const target = join(tempDir('outside'), 'model.pt');
    writeFileSync(target, 'w');
    symlinkSync(target, join(dir, 'model.pt'));
    mkdirSync(join(dir, 'sub'));
    await expect(snapshotDirectory(dir, 'output/x', storeDir, limits)).rejects.toThrow(/symlink.*cp -L/s);
    expect(readdirSync(storeDir)).toEqual([]);
  });
});
