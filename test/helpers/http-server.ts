import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { unmountStaleWorkspaces } from '../../sandbox/run-storage.js';
import { ownerAlive } from '../../sandbox/process-tree.js';
import { Store } from '../../src/store/store.js';
import { cliEntry } from '../../src/util/paths.js';
import { unlimitedCalls } from './mcp.js';

/** The admin token every test HTTP server accepts for `POST /runs`. */
export const adminToken = 'test-admin-token';

export interface HttpServer {
  child: ChildProcess;
  home: string;
  url: string;
  port: number;
  exited: Promise<number | null>;
  /** What the server wrote to stderr so far (also kept in `<home>/server-stderr.log`). */
  stderr(): string;
}

/** A real `a2rl serve --http` child on a free loopback port, on `home`, with extra `serve` flags. */
export async function startHttpServer(home: string, args: string[] = []): Promise<HttpServer> {
  const child = spawn(process.execPath, [cliEntry, 'serve', '--http', '--port', '0', ...unlimitedCalls, ...args], {
    env: { ...process.env, A2RL_HOME: home, A2RL_ADMIN_TOKEN: adminToken },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${stderr}`)), 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk;
      // Kept for the post-mortem of a failed test; not while the home is full (test/redteam/disk-full.test.ts fills it).
      try {
        appendFileSync(join(home, 'server-stderr.log'), chunk);
      } catch {}
      const match = /listening on (http:\/\/\S+)/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void exited.then(() => reject(new Error(`server exited: ${stderr}`)));
  });
  return { child, home, url, port: Number(new URL(url).port), exited, stderr: () => stderr };
}

export async function killServer(server: HttpServer): Promise<void> {
  server.child.kill('SIGKILL');
  await server.exited;
  // A killed server's workspace filesystems stay mounted until a server on its home recovers: taken down here, as then.
  const store = new Store(join(server.home, 'store.sqlite'));
  try {
    await unmountStaleWorkspaces(server.home, (runId) => {
      const owner = store.getRun(runId)?.owner;
      return owner !== undefined && ownerAlive(owner);
    });
  } finally {
    store.close();
  }
}
