import { execFile } from 'node:child_process';
import { lstat, readdir, readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { join, normalize, sep } from 'node:path';
import { promisify } from 'node:util';
import type { Store } from '../store/store.js';
import { statusOfCode } from '../mcp/transports/http/routes.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import { cliEntry, packageRoot } from '../util/paths.js';
import { lowSpaceWarning } from '../store/disk-full.js';
import { ViewData } from './data.js';
import { DiskAccounts } from './disk.js';
import { escapeHtml } from './html.js';
import { leaderboardPage } from './leaderboard-page.js';
import { LiveFeed } from './live.js';
import { runPage } from './run-page.js';
import { runCursor, runFilters, runsPage } from './runs-page.js';
import { BoardStream, RunStream, RunsStream } from './streams.js';
import { presentedViewToken, viewCookie, viewTokenMatches } from './token.js';

export interface ViewOptions {
  store: Store;
  /** `$A2RL_HOME`: exports are written under it. */
  home: string;
  /** The operator's view token ({@link viewToken}). */
  token: string;
  /** The server's per-run disk quota, for the disk bars. */
  diskQuotaBytes: number;
}

/** The view's handler for `/view` and below, mounted by `serve --http` and served alone by `a2rl view` (src/view/worker-proxy.ts). */
export interface View {
  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void>;
  close(): void;
}

const require = createRequire(import.meta.url);
/** The files the pages load, all from this package or its node_modules: nothing is fetched from elsewhere. */
const assets: Record<string, { path: string; type: string }> = {
  'view.js': { path: join(packageRoot, 'src', 'view', 'client', 'view.js'), type: 'text/javascript; charset=utf-8' },
  'view.css': { path: join(packageRoot, 'src', 'view', 'client', 'view.css'), type: 'text/css; charset=utf-8' },
  'uPlot.iife.min.js': { path: require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  'uPlot.min.css': { path: require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
};

/** Longest an export may take before the view gives up on it (a run with gigabytes of logs and trajectories). */
const exportTimeoutMs = 300_000;

/** The pages run no script but the view's own and uPlot's, and load nothing from elsewhere. */
const securityHeaders = {
  'Content-Security-Policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/** The view served on the calling thread, with the store it is given: what the view's worker runs (src/view/worker.ts). */
export function createViewHere(options: ViewOptions): View {
  const data = new ViewData(options.store, new DiskAccounts(options.diskQuotaBytes));
  const feed = new LiveFeed(options.store.db);

  const send = (res: ServerResponse, status: number, body: string | Buffer, type = 'text/html; charset=utf-8') =>
    void res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', ...securityHeaders }).end(body);

  async function route(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new A2rlError('INVALID_INPUT', `The view is read-only: ${req.method} is not served; open the pages with GET.`);
    }
    authenticate(req, res, url, options.token);
    if (res.headersSent) return;
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const after = Number(url.searchParams.get('after') ?? 0) || 0;
    if (path === '/view') return send(res, 200, runsPage(data, runFilters(url), lowSpaceWarning(options.home), runCursor(url)));
    if (path === '/view/leaderboard') return send(res, 200, leaderboardPage(data));
    if (path === '/view/leaderboard.json') return send(res, 200, JSON.stringify(data.leaderboard(), null, 2), 'application/json');
    if (path === '/view/live') {
      return feed.start(res, url.searchParams.has('board') ? new BoardStream(data, after) : new RunsStream(data, runFilters(url), after));
    }
    if (path.startsWith('/view/assets/')) {
      const asset = assets[path.slice('/view/assets/'.length)];
      if (!asset) throw new A2rlError('NOT_FOUND', `No asset ${path}.`);
      return send(res, 200, await readFile(asset.path), asset.type);
    }
    const runMatch = /^\/view\/runs\/([^/]+)(\/live|\/export(\/.*)?)?$/.exec(url.pathname);
    if (runMatch) {
      const runId = decodePath(runMatch[1]!);
      if (!options.store.getRun(runId)) throw new A2rlError('NOT_FOUND', `No run "${runId}"; the runs are listed at /view.`);
      if (runMatch[2] === undefined) return send(res, 200, (await runPage(data, runId))!);
      if (runMatch[2] === '/live') return feed.start(res, new RunStream(data, runId, after, logOffsets(url)));
      return serveExport(res, runId, decodePath(runMatch[3] ?? '/'));
    }
    throw new A2rlError('NOT_FOUND', `Nothing at ${url.pathname}. The view's pages: /view (runs), /view/runs/<id>, /view/leaderboard.`);
  }

  /** Exports in progress by run: a second click waits for the first rather than writing the same folder. */
  const exporting = new Map<string, Promise<unknown>>();

  /**
   * A run's export folder, written again when its listing or report is opened, so it shows the run as it is now. The
   * export (logs, trajectories and code copied) is written by `a2rl runs export` in a process of its own: never on
   * the event loop that tool calls wait for.
   */
  async function serveExport(res: ServerResponse, runId: string, inside: string): Promise<void> {
    const dir = join(options.home, 'view-exports', runId);
    if (inside === '/' || inside === '/report.html') {
      let written = exporting.get(runId);
      if (!written) {
        written = promisify(execFile)(process.execPath, [cliEntry, '--home', options.home, 'runs', 'export', runId, '--out', dir], {
          timeout: exportTimeoutMs,
        }).finally(() => exporting.delete(runId));
        exporting.set(runId, written);
      }
      await written.catch((error: { stderr?: string }) => {
        throw new A2rlError(
          'UNAVAILABLE',
          `Writing the export failed: ${error.stderr?.trim() || String(error)}. Try again, or run a2rl runs export ${runId}.`,
        );
      });
    }
    const target = normalize(join(dir, inside));
    if (target !== dir && !target.startsWith(`${dir}${sep}`)) throw new A2rlError('NOT_FOUND', `No ${inside} in the export.`);
    // The export holds plain files and folders only; a link is not followed.
    const info = await lstat(target).catch(() => undefined);
    if (!info || info.isSymbolicLink())
      throw new A2rlError('NOT_FOUND', `No ${inside} in the export of ${runId}; open its folder to write it again.`);
    if (info.isDirectory()) {
      if (!inside.endsWith('/'))
        return void res.writeHead(303, { Location: `/view/runs/${encodeURIComponent(runId)}/export${inside}/` }).end();
      const entries = await readdir(target, { withFileTypes: true });
      const items = entries.map((e) => {
        const name = `${e.name}${e.isDirectory() ? '/' : ''}`;
        return `<li><a href="${encodeURIComponent(e.name)}${e.isDirectory() ? '/' : ''}">${escapeHtml(name)}</a></li>`;
      });
      return send(
        res,
        200,
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Export of ${escapeHtml(runId)}</title><link rel="stylesheet" href="/view/assets/view.css"></head>` +
          `<body><main id="main"><h1>Export of run ${escapeHtml(runId)}: ${escapeHtml(inside)}</h1><ul>${items.join('')}</ul></main></body></html>`,
      );
    }
    // Only the report this package wrote is HTML; everything else (the agent's code among it) is shown as text.
    const type =
      inside === '/report.html' ? 'text/html; charset=utf-8' : inside.endsWith('.json') ? 'application/json' : 'text/plain; charset=utf-8';
    return send(res, 200, await readFile(target), type);
  }

  return {
    close: () => feed.close(),
    handle: (req, res, url) =>
      route(req, res, url).catch((error: unknown) => {
        if (res.headersSent) return void res.end();
        const status = isA2rlError(error) ? (statusOfCode[error.code] ?? 500) : 500;
        const message = isA2rlError(error)
          ? error.message
          : `The view failed on this page: ${String(error)}. Reload it; report it if it persists.`;
        send(res, status, errorPage(status, message));
      }),
  };
}

/**
 * Lets in the operator's view token and nothing else (a run token or the admin token never opens the view). A token
 * in the URL becomes an HttpOnly cookie and the browser is sent on without it, so it stays out of history and logs.
 */
function authenticate(req: IncomingMessage, res: ServerResponse, url: URL, token: string): void {
  const presented = presentedViewToken(req, url);
  if (presented === undefined) {
    throw new A2rlError(
      'UNAUTHORIZED',
      'The view needs the operator’s view token: open /view?token=<view token> (a2rl view-token prints it), or send "Authorization: Bearer <view token>".',
    );
  }
  if (!viewTokenMatches(token, presented.token)) {
    throw new A2rlError(
      'UNAUTHORIZED',
      'That token does not open the view. Run tokens and the admin token never do: use the operator’s view token (a2rl view-token prints it).',
    );
  }
  if (presented.via === 'query') {
    url.searchParams.delete('token');
    res
      .writeHead(303, {
        'Set-Cookie': `${viewCookie}=${encodeURIComponent(token)}; Path=/view; HttpOnly; SameSite=Strict`,
        Location: `${url.pathname}${url.search}`,
        ...securityHeaders,
      })
      .end();
  }
}

function decodePath(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new A2rlError('INVALID_INPUT', `The path "${part}" is not valid percent-encoding; follow the view's own links.`);
  }
}

/** `logs=<job id>:<offset>,…`: where the page's log tails end, so its stream continues each from there. */
function logOffsets(url: URL): Map<number, number> {
  const pairs = (url.searchParams.get('logs') ?? '').split(',').flatMap((pair) => {
    const match = /^(\d+):(\d+)$/.exec(pair);
    return match ? [[Number(match[1]), Number(match[2])] as [number, number]] : [];
  });
  return new Map(pairs);
}

function errorPage(status: number, message: string): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${status} · a2rl view</title><style>body{font:16px/1.5 system-ui,sans-serif;margin:2em;max-width:50em;color:#111}</style></head>` +
    `<body><main><h1>${status === 401 ? 'Not authorised' : `Error ${status}`}</h1><p id="error">${escapeHtml(message)}</p></main></body></html>`
  );
}
