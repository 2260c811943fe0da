import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * The scale bench's browser (bench/scale.ts): a process of its own that loads the view's pages, as a browser would
 * from another process (usually another machine), so that reading their answers never shares an event loop with the
 * bench's timed MCP client. A browser on another machine takes none of the server's CPUs: this one runs under
 * SCHED_IDLE, every thread (`chrt`; nice 19 where chrt is missing), so that it takes only what this machine's other
 * processes leave; at nice 19 it still took a share of the two cores the server and its view run on. The server's own
 * work for each page (the view's process rendering and sending it) is all measured. Started by `fork` with
 * `{ base, token, paths, loop }`: loads every path at once, again and again while `loop` until told `stop`; answers
 * `{ loads, pages }` (the last round's first byte, total and size of each page) and exits.
 */

for (const thread of readdirSync('/proc/self/task')) setPriority(Number(thread), 19);
spawnSync('chrt', ['--idle', '--all-tasks', '--pid', '0', String(process.pid)]);

interface Orders {
  base: string;
  token: string;
  paths: string[];
  loop: boolean;
}

/** A page's first byte (headers), whole answer and size. */
export interface PageLoad {
  first_byte_ms: number;
  total_ms: number;
  bytes: number;
}

const round = (x: number) => Math.round(x * 100) / 100;

async function loadPage(url: string, token: string): Promise<PageLoad> {
  const start = performance.now();
  const response = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
  const firstByte = performance.now() - start;
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
  const body = await response.arrayBuffer();
  return { first_byte_ms: round(firstByte), total_ms: round(performance.now() - start), bytes: body.byteLength };
}

let stopped = false;
process.on('message', (message: unknown) => {
  if (message === 'stop') stopped = true;
});
process.once('message', (orders: Orders) => {
  void (async () => {
    let loads = 0;
    let pages: Record<string, PageLoad> = {};
    do {
      const round = await Promise.all(orders.paths.map((path) => loadPage(`${orders.base}${path}`, orders.token)));
      pages = Object.fromEntries(orders.paths.map((path, i) => [path, round[i]!]));
      loads += orders.paths.length;
    } while (orders.loop && !stopped);
    process.send!({ loads, pages }, () => process.disconnect());
  })().catch((error: unknown) => {
    process.send!({ error: String(error) }, () => process.disconnect());
  });
});
