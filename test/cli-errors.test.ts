import Database from 'better-sqlite3';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { createServer as createNetServer, type Server } from 'node:net';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeFailure } from '../src/cli/exit.js';
import { Store } from '../src/store/store.js';
import { exitStatuses } from '../src/util/errors.js';
import { listTaskIds } from '../src/tasks/task.js';
import { cliEntry } from '../src/util/paths.js';
import { tempDir } from './helpers/sandbox.js';

/** One CLI failure as a user meets it: the command, the one line it must print, and the exit status of its class. */
interface Case {
  name: string;
  args: () => string[];
  line: RegExp;
  status: number;
  env?: Record<string, string>;
  /** Why the case cannot run on this host, when it cannot. */
  skip?: () => string | undefined;
  /** What must hold after the command (a store left as it was). */
  after?: () => void;
}

interface Outcome {
  status: number | null;
  stdout: string;
  stderr: string;
}

const cli = (args: string[], env: Record<string, string> = {}): Promise<Outcome> =>
  new Promise((resolve) => {
    execFile(process.execPath, [cliEntry, ...args], { env: { ...process.env, ...env }, timeout: 90_000 }, (error, stdout, stderr) =>
      resolve({ status: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });

const root = tempDir('cli-errors');
const path = (...parts: string[]) => join(root, ...parts);
/** A read-only filesystem, for an unwritable home and a read-only store (root mounts one; elsewhere those cases skip). */
const readOnly = path('read-only');
let readOnlyMounted = false;
let busyPort = 0;
let busy: Server;
/** A socket that accepts and never answers: a Docker engine that hangs. */
const silentSocket = path('silent.sock');
let silent: Server;
const storeBytes = (home: string) => readFileSync(join(home, 'store.sqlite'));

beforeAll(async () => {
  // A home with a store, for the commands that need one.
  mkdirSync(path('home'));
  const store = new Store(path('home', 'store.sqlite'));
  store.insertRun({
    id: 'ended',
    task_id: 'micro-gsm8k',
    label: 'ended',
    budget: '{}',
    dir: path('home', 'runs', 'ended'),
    sandbox: 'bwrap',
    grader_version: 'test',
    owner: 'gone',
    created_at: Date.now(),
  });
  store.endRun('ended', 'the agent disconnected', Date.now());
  store.close();
  mkdirSync(path('empty'));
  writeFileSync(path('empty', 'store.sqlite'), '');
  mkdirSync(path('corrupt'));
  writeFileSync(path('corrupt', 'store.sqlite'), 'SQLite format 2\0 this is no database '.repeat(200));
  mkdirSync(path('newer'));
  const newer = new Database(path('newer', 'store.sqlite'));
  newer.exec('CREATE TABLE runs (id TEXT)');
  newer.pragma('user_version = 9999');
  newer.close();
  writeFileSync(path('a-file'), 'not a folder\n');
  mkdirSync(path('suite-home'));
  writeFileSync(
    path('wide.yaml'),
    'name: wide\ntasks: [micro-gsm8k]\nagents:\n  - id: stand-in\n    command: "true"\nbackend:\n  parallel: 100000\n',
  );
  mkdirSync(readOnly);
  if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', readOnly]).status === 0) {
    mkdirSync(join(readOnly, 'home'));
    expect((await cli(['--home', join(readOnly, 'home'), 'runs', 'list'])).status).toBe(0);
    readOnlyMounted = spawnSync('mount', ['-o', 'remount,ro', readOnly]).status === 0;
  }
  busy = createNetServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  busyPort = (busy.address() as { port: number }).port;
  silent = createNetServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(silentSocket, resolve));
});

afterAll(() => {
  busy?.close();
  silent?.close();
  spawnSync('umount', [readOnly]);
  rmSync(root, { recursive: true, force: true });
});

const noReadOnlyMount = () => (readOnlyMounted ? undefined : 'mounting a read-only tmpfs needs root (CAP_SYS_ADMIN)');

const cases: Case[] = [
  {
    name: "a suite's backend.parallel over this host's CPUs is refused before the home is touched",
    args: () => ['--home', path('suite-home'), 'suite', 'run', path('wide.yaml')],
    line: /^a2rl: backend\.parallel: 100000 runs at once is more than this host's \d+ CPUs; write at most \d+\.$/,
    status: exitStatuses.usage,
    after: () => expect(readdirSync(path('suite-home'))).toEqual([]),
  },
  {
    name: 'a --home that does not exist (a typo) is refused, no store made',
    args: () => ['--home', path('hme'), 'runs', 'list'],
    line: /^a2rl: --home \S+\/hme does not exist: check its spelling .*add --init to make a new home there\.$/,
    status: exitStatuses.notFound,
  },
  {
    name: '--home naming a file',
    args: () => ['--home', path('a-file'), 'runs', 'list'],
    line: /^a2rl: --home \S+\/a-file is a file, not a folder: give the folder of an a2rl home\.$/,
    status: exitStatuses.usage,
  },
  {
    name: '--home --init under a file',
    args: () => ['--home', path('a-file', 'home'), '--init', 'runs', 'list'],
    line: /^a2rl: \S+\/a-file\/home lies under a file, not a folder: give a path under a folder\.$/,
    status: exitStatuses.usage,
  },
  {
    name: '--home --init on a read-only disk',
    args: () => ['--home', join(readOnly, 'new'), '--init', 'runs', 'list'],
    line: /^a2rl: \S+\/read-only is on a read-only filesystem: give a path on a writable one\.$/,
    status: exitStatuses.permission,
    skip: noReadOnlyMount,
  },
  {
    name: 'an empty (0-byte) store is refused, never replaced',
    args: () => ['--home', path('empty'), 'runs', 'list'],
    line: /^a2rl: \S+\/store\.sqlite is empty \(0 bytes\), so its runs are lost; a2rl never replaces a store: restore it from a backup, or remove it to start a new one\.$/,
    status: exitStatuses.store,
    after: () => expect(statSync(path('empty', 'store.sqlite')).size).toBe(0),
  },
  {
    name: 'a corrupt store is refused, never replaced',
    args: () => ['--home', path('corrupt'), 'runs', 'list'],
    line: /^a2rl: \S+\/store\.sqlite is not a readable a2rl store \(SQLite: file is not a database\); a2rl never replaces a store: restore it from a backup, or move it away to start a new one\.$/,
    status: exitStatuses.store,
    after: () => expect(storeBytes(path('corrupt')).toString()).toBe('SQLite format 2\0 this is no database '.repeat(200)),
  },
  {
    name: 'a store of a newer a2rl is refused',
    args: () => ['--home', path('newer'), 'runs', 'list'],
    line: /^a2rl: \S+\/store\.sqlite is a store of a newer a2rl \(schema 9999; this one knows up to \d+\): run the a2rl that wrote it, or update this one\.$/,
    status: exitStatuses.store,
  },
  {
    name: 'a store on a read-only disk',
    args: () => ['--home', join(readOnly, 'home'), 'runs', 'revoke', 'some-run'],
    line: /^a2rl: The store cannot be written \(SQLite: .*\): give a --home on a writable disk, or make the home and its store\.sqlite writable\.$/,
    status: exitStatuses.permission,
    skip: noReadOnlyMount,
  },
  {
    name: 'a missing replay file',
    args: () => ['--home', path('home'), 'replay', path('missing.jsonl'), '--task', 'micro-gsm8k'],
    line: /^a2rl: \S+\/missing\.jsonl does not exist \(open\): check the path\.$/,
    status: exitStatuses.notFound,
  },
  {
    name: '--out under a file',
    args: () => ['--home', path('home'), 'runs', 'export', 'ended', '--out', path('a-file', 'export')],
    line: /^a2rl: \S+\/a-file\/export lies under a file, not a folder: give a path under a folder\.$/,
    status: exitStatuses.usage,
  },
  {
    name: 'a port in use (serve --http)',
    args: () => ['--home', path('home'), 'serve', '--http', '--port', String(busyPort)],
    line: /^a2rl: Port \d+ on 127\.0\.0\.1 is in use by another process: pick another with --port \(0: any free port\), or stop the process holding it\.$/,
    status: exitStatuses.unavailable,
  },
  {
    name: 'a port in use (view)',
    args: () => ['--home', path('home'), 'view', '--port', String(busyPort)],
    line: /^a2rl: Port \d+ on 127\.0\.0\.1 is in use by another process/,
    status: exitStatuses.unavailable,
  },
  {
    name: 'images build with no engine at the socket',
    args: () => ['images', 'build', 'micro'],
    env: { DOCKER_HOST: `unix://${path('no-engine.sock')}` },
    line: /^a2rl: No Docker engine answered at unix:\/\/\S+\/no-engine\.sock within 10 s \(.*\): start one .*or point DOCKER_HOST at one that runs\.$/,
    status: exitStatuses.unavailable,
  },
  {
    name: 'images build with an engine that never answers',
    args: () => ['images', 'build', 'micro'],
    env: { DOCKER_HOST: `unix://${silentSocket}` },
    line: /^a2rl: No Docker engine answered at unix:\/\/\S+\/silent\.sock within 10 s/,
    status: exitStatuses.unavailable,
  },
  {
    name: 'an unknown option (commander prints its own line)',
    args: () => ['--home', path('home'), 'runs', 'list', '--bogus'],
    line: /^error: unknown option '--bogus'$/,
    status: exitStatuses.usage,
  },
  {
    name: 'a replay whose expectation fails',
    args: () => ['--home', path('home'), 'replay', path('wrong.jsonl'), '--task', 'micro-gsm8k'],
    line: /^a2rl: replay line 1 \(budget_status\): expected \{"field":"run_id","equals":"no-such-run"\}, got run_id = "\S+"$/,
    status: exitStatuses.checkFailed,
  },
];

describe('the CLI error table: each expected failure is one line and the exit status of its class', () => {
  beforeAll(() =>
    writeFileSync(
      path('wrong.jsonl'),
      `${JSON.stringify({ tool: 'budget_status', expect: { field: 'run_id', equals: 'no-such-run' } })}\n`,
    ),
  );

  it.concurrent.for(cases)('$name', async (c, { skip }) => {
    const why = c.skip?.();
    if (why) return skip(why);
    const { status, stderr } = await cli(c.args(), c.env);
    // The server's structured log (JSON lines: what a start swept up) is no error output.
    const lines = stderr.split('\n').filter((line) => line.trim() && !line.startsWith('{'));
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toMatch(c.line);
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(status, stderr).toBe(c.status);
    c.after?.();
  });

  it('takes a --home naming the default home ($A2RL_HOME) as the default: made on first use', async () => {
    const home = path('default-home');
    const { status, stderr } = await cli(['--home', home, 'runs', 'list'], { A2RL_HOME: home });
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(statSync(join(home, 'store.sqlite')).size).toBeGreaterThan(0);
  });

  it('prints the stack trace too with --debug, and never makes the typo home', async () => {
    const { status, stderr } = await cli(['--home', path('hme'), '--debug', 'runs', 'list']);
    expect(status).toBe(exitStatuses.notFound);
    expect(stderr.split('\n')[0]).toMatch(/does not exist: check its spelling/);
    expect(stderr).toMatch(/^\s+at .*options\.js/m);
    expect(() => statSync(path('hme'))).toThrow();
  });

  it('ends quietly on a closed stdout pipe (EPIPE), as a process killed by SIGPIPE', async () => {
    const child = spawn(process.execPath, [cliEntry, 'tasks'], { stdio: ['ignore', 'pipe', 'pipe'] });
    // The reader is gone long before the CLI has loaded and writes its first line.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const status = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(stderr).toBe('');
    expect(status).toBe(exitStatuses.closedPipe);
  });

  it('a demo whose oracle fails says why in one line, and its status names the task', async () => {
    // A compute budget the SFT job cannot finish in: the budget stops it, and the oracle's next check fails.
    const home = path('demo');
    const { status, stderr, stdout } = await cli(['--home', home, '--init', 'demo', '--task', 'micro-gsm8k', '--budget', 'compute=3']);
    const failures = stderr.split('\n').filter((line) => line.startsWith('a2rl: demo:'));
    expect(failures, stderr).toHaveLength(1);
    expect(failures[0]).toMatch(
      /^a2rl: demo: micro-gsm8k failed: job-\d+ \((?:exec|training|rollouts)\) was stopped by the budget \(.*\) after \d+ s wall, \d+ CPU-s(; it got \d+% of its \d+ CPU\(s\): the machine's load averaged [\d.]+ on \d+ cores meanwhile)?, so replay line \d+ \(\w+\) failed: run it on a less loaded machine, or give more with --budget$/,
    );
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(status).toBe(100 + listTaskIds().indexOf('micro-gsm8k') + 1);
    // The run it made is still summed up.
    expect(stdout).toMatch(/run \S+ \(micro-gsm8k\): /);
  });
});

describe('SQLite errors as the CLI reports them', () => {
  it('sends only a damaged store to its backup: a constraint or a misuse is a bug, said as one', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)');
    const constraint = (() => {
      try {
        db.exec('INSERT INTO t VALUES (1)');
      } catch (error) {
        return error;
      }
    })();
    db.close();
    expect((constraint as { code: string }).code).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
    expect(describeFailure(constraint)).toEqual({
      line: expect.stringMatching(/^UNIQUE constraint failed: t\.id \(an unexpected error: run again with --debug/),
      status: exitStatuses.internal,
    });
    for (const code of ['SQLITE_CORRUPT', 'SQLITE_NOTADB']) {
      expect(describeFailure(new Database.SqliteError('database disk image is malformed', code))).toEqual({
        line: expect.stringMatching(/^The store cannot be read \(SQLite: .*\): restore store\.sqlite from a backup/),
        status: exitStatuses.store,
      });
    }
  });
});
