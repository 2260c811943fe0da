import { type ChildProcess, spawn } from 'node:child_process';
import type { Store } from '../src/store/store.js';
import type { Task } from '../src/tasks/task.js';
import { cliEntry } from '../src/util/paths.js';

/** No rate limit on tool calls: the benches measure the server, not its limiter. */
export const unlimitedCalls = ['--calls-per-second', '1000000'];

/** How long a bench waits for `serve --http` to print its address before it gives up and stops it. */
const serverStartSeconds = 180;

/**
 * `a2rl serve --http` on a free loopback port, with its own home and admin token; it fails (and the child is killed)
 * when it exits or does not listen within {@link serverStartSeconds}, so a hung start never hangs the bench.
 */
export async function startHttpServer(
  home: string,
  adminToken: string,
  serveArgs: string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [cliEntry, 'serve', '--http', '--port', '0', ...unlimitedCalls, ...serveArgs], {
    env: { ...process.env, A2RL_HOME: home, A2RL_ADMIN_TOKEN: adminToken },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  let timer: NodeJS.Timeout | undefined;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`serve --http did not listen within ${serverStartSeconds} s: ${stderr}`)),
        serverStartSeconds * 1000,
      );
      child.once('exit', (code) => reject(new Error(`serve --http exited with ${code}: ${stderr}`)));
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk;
        const match = /listening on (http:\/\/\S+)/.exec(stderr);
        if (match) resolve(match[1]!);
      });
    });
    return { child, url };
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Records a grade of `task` for content `hash`: public `score`, private one less (the benches' submissions and baselines). */
export function recordGrade(store: Store, task: Pick<Task, 'id' | 'graderVersion'>, hash: string, score: number): void {
  store.insertGrade({
    task_id: task.id,
    grader_version: task.graderVersion,
    content_hash: hash,
    public_score: score,
    private_score: score - 1,
    details: '{}',
    duration_ms: 1,
    created_at: 0,
  });
}
