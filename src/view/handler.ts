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
import { liveStreams } from './streams.js';
import { timelineScript, timelineScriptFile } from '../reports/timeline.js';
import { presentedViewCredential, safeEqual, viewCookie, type ViewSession, ViewSessions, viewTokenMatches } from './token.js';

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
/**
 * The files the pages load, all from this package or its node_modules: nothing is fetched from elsewhere. Served
 * without a token (they are the package's own), so that the error pages load them too.
 */
const assets: Record<string, { path: string; type: string }> = {
  'view.js': { path: join(packageRoot, 'src', 'view', 'client', 'view.js'), type: 'text/javascript; charset=utf-8' },
  'clean-url.js': { path: join(packageRoot, 'src', 'view', 'client', 'clean-url.js'), type: 'text/javascript; charset=utf-8' },
  'view.css': { path: join(packageRoot, 'src', 'view', 'client', 'view.css'), type: 'text/css; charset=utf-8' },
  'uPlot.iife.min.js': { path: require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  'uPlot.min.css': { path: require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
};

/** Longest an export may take before the view gives up on it (a run with gigabytes of logs and trajectories). */
const exportTimeoutMs = 300_000;

/**
 * The pages run no script but the view's own, uPlot's and the report's (all files: no inline script), load nothing from
 * elsewhere and post forms only to the view. 'same-origin' referrers: with 'no-referrer' a browser sends `Origin: null`
 * on the view's own POSTs, which the Origin check then could not tell from another site's.
 */
const securityHeaders = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
};

/** The largest form a POST may send the view (a CSRF token). */
const maxFormBytes = 4096;

/** The view served on the calling thread, with the store it is given: what the view's worker runs (src/view/worker.ts). */
export function createViewHere(options: ViewOptions): View {
  const data = new ViewData(options.store, new DiskAccounts(options.diskQuotaBytes));
  const feed = new LiveFeed(options.store.db);
  const sessions = new ViewSessions(options.token);

  const send = (res: ServerResponse, status: number, body: string | Buffer, type = 'text/html; charset=utf-8') =>
    void res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', ...securityHeaders }).end(body);

  async function route(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const path = url.pathname.replace(/\/+$/, '') || '/';
    if (path.startsWith('/view/assets/') && (req.method === 'GET' || req.method === 'HEAD')) {
      const asset = assets[path.slice('/view/assets/'.length)];
      if (!asset) throw new A2rlError('NOT_FOUND', `No asset ${path}.`);
      return send(res, 200, await readFile(asset.path), asset.type);
    }
    const access = authenticate(req, res, url);
    if (!access) return;
    const exportRequest = /^\/view\/runs\/([^/]+)\/export$/.exec(path);
    if (req.method === 'POST' && exportRequest) {
      await refuseForgery(req, access.session);
      const runId = decodePath(exportRequest[1]!);
      if (!options.store.getRun(runId)) throw new A2rlError('NOT_FOUND', `No run "${runId}"; the runs are listed at /view.`);
      await writeExport(runId);
      return void res.writeHead(303, { Location: `/view/runs/${encodeURIComponent(runId)}/export/report.html` }).end();
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new A2rlError(
        'INVALID_INPUT',
        `The view answers ${req.method} nowhere but POST /view/runs/<id>/export (which writes a run's export); open its pages with GET.`,
      );
    }
    if (path === '/view') return send(res, 200, runsPage(data, runFilters(url), lowSpaceWarning(options.home), runCursor(url)));
    if (path === '/view/leaderboard') return send(res, 200, leaderboardPage(data));
    if (path === '/view/leaderboard.json') return send(res, 200, JSON.stringify(await data.leaderboard(), null, 2), 'application/json');
    if (path === '/view/live') {
      refuseOtherSite(req);
      return feed.start(res, liveStreams(data, url));
    }
    const runMatch = /^\/view\/runs\/([^/]+)(\/live|\/export(\/.*)?)?$/.exec(url.pathname);
    if (runMatch) {
      const runId = decodePath(runMatch[1]!);
      if (!options.store.getRun(runId)) throw new A2rlError('NOT_FOUND', `No run "${runId}"; the runs are listed at /view.`);
      if (runMatch[2] === undefined) return send(res, 200, (await runPage(data, runId, access.session?.csrf ?? ''))!);
      if (runMatch[2] === '/live') {
        refuseOtherSite(req);
        return feed.start(res, liveStreams(data, url));
      }
      return serveExport(res, runId, decodePath(runMatch[3] ?? '/'));
    }
    throw new A2rlError('NOT_FOUND', `Nothing at ${url.pathname}. The view's pages: /view (runs), /view/runs/<id>, /view/leaderboard.`);
  }

  /** Exports in progress by run: a second click waits for the first rather than writing the same folder. */
  const exporting = new Map<string, Promise<unknown>>();

  const exportDir = (runId: string) => join(options.home, 'view-exports', runId);

  /**
   * Writes a run's export folder again (POST only: a link or another site's page must not make the view write), so it
   * shows the run as it is now. The export (logs, trajectories and code copied) is written by `a2rl runs export` in a
   * process of its own: never on the event loop that tool calls wait for.
   */
  async function writeExport(runId: string): Promise<void> {
    let written = exporting.get(runId);
    if (!written) {
      written = promisify(execFile)(
        process.execPath,
        [cliEntry, '--home', options.home, 'runs', 'export', runId, '--out', exportDir(runId)],
        { timeout: exportTimeoutMs },
      ).finally(() => exporting.delete(runId));
      exporting.set(runId, written);
    }
    await written.catch((error: { stderr?: string }) => {
      throw new A2rlError(
        'UNAVAILABLE',
        `Writing the export failed: ${error.stderr?.trim() || String(error)}. Try again, or run a2rl runs export ${runId}.`,
      );
    });
  }

  /** A file of a run's export folder as last written; the report's script is this package's own, never a file of the folder. */
  async function serveExport(res: ServerResponse, runId: string, inside: string): Promise<void> {
    const dir = exportDir(runId);
    if (inside === `/${timelineScriptFile}`) return send(res, 200, timelineScript, 'text/javascript; charset=utf-8');
    const target = normalize(join(dir, inside));
    if (target !== dir && !target.startsWith(`${dir}${sep}`)) throw new A2rlError('NOT_FOUND', `No ${inside} in the export.`);
    // The export holds plain files and folders only; a link is not followed.
    const info = await lstat(target).catch(() => undefined);
    if (!info || info.isSymbolicLink()) {
      throw new A2rlError(
        'NOT_FOUND',
        `No ${inside} in the export of ${runId}: press "Write the export" on /view/runs/${runId} (or run a2rl runs export ${runId}).`,
      );
    }
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

  /**
   * Lets in the operator's view token (a bearer header: scripts) or a session it opened (the cookie a login link sets)
   * and nothing else: a run token or the admin token never opens the view. A login link's code is exchanged for a
   * session and the browser sent on without it; the view token itself is never in a URL or a cookie. Undefined when
   * the answer is sent already (that redirect).
   */
  function authenticate(req: IncomingMessage, res: ServerResponse, url: URL): { session?: ViewSession } | undefined {
    const fresh = 'a2rl view-token --link <this server’s URL> prints a login link (it works once, within a minute)';
    if (url.searchParams.has('token')) {
      throw new A2rlError(
        'UNAUTHORIZED',
        `The view takes no token in its URL (a URL stays in the browser's history): ${fresh}; scripts send "Authorization: Bearer <view token>".`,
      );
    }
    const code = url.searchParams.get('code');
    if (code !== null) {
      const redeemed = sessions.redeem(code);
      url.searchParams.delete('code');
      const held = presentedViewCredential(req);
      // A spent link followed again (the history, a reload) by a browser that is logged in already: just the page.
      if (typeof redeemed === 'string' && held && 'sessionId' in held && sessions.get(held.sessionId)) {
        return void res.writeHead(303, { Location: `${url.pathname}${url.search}`, ...securityHeaders }).end();
      }
      if (typeof redeemed === 'string') throw new A2rlError('UNAUTHORIZED', redeemed);
      const session = redeemed;
      // Secure where a TLS proxy fronts the view (it says so); the view itself speaks plain HTTP on loopback.
      const secure = req.headers['x-forwarded-proto'] === 'https' ? '; Secure' : '';
      res
        .writeHead(303, {
          'Set-Cookie': `${viewCookie(req)}=${session.id}; Path=/view; HttpOnly; SameSite=Strict${secure}`,
          Location: `${url.pathname}${url.search}`,
          ...securityHeaders,
        })
        .end();
      return undefined;
    }
    const presented = presentedViewCredential(req);
    if (presented === undefined) {
      throw new A2rlError(
        'UNAUTHORIZED',
        `The view needs the operator’s view token: ${fresh}, or send "Authorization: Bearer <view token>".`,
      );
    }
    if ('sessionId' in presented) {
      const session = sessions.get(presented.sessionId);
      if (!session) {
        throw new A2rlError(
          'UNAUTHORIZED',
          `This browser's view session ended (sessions end with the server, after 12 h unused, or 7 days after their login): ${fresh}.`,
        );
      }
      return { session };
    }
    if (!viewTokenMatches(options.token, presented.token)) {
      throw new A2rlError(
        'UNAUTHORIZED',
        'That token does not open the view. Run tokens and the admin token never do: use the operator’s view token (a2rl view-token prints it).',
      );
    }
    return {};
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
 * A request a browser says another site's (or another port's: `same-site`) page made, where the view's own script is
 * the only one that should ask (its live streams, its POST): cookies ignore ports, so a server on another 127.0.0.1
 * port gets the session cookie and could open them otherwise. Browsers that send no `Sec-Fetch-Site` are let by.
 */
function refuseOtherSite(req: IncomingMessage, allowed: readonly string[] = ['same-origin', 'none']): void {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && !allowed.includes(site)) {
    throw new A2rlError('FORBIDDEN', `Refused: a ${site} page sent this request, not from the view; use the view's own pages.`);
  }
}

/**
 * A browser's POST must come from the view's own page: same-origin by its `Sec-Fetch-Site` where it sends one, its
 * Origin (or, without one, its Referer) this server, and it carries the session's CSRF token. Another page (another
 * port of 127.0.0.1 is the same site, so the SameSite cookie goes with its forms) knows neither. A bearer request is a
 * script's, which no other page can make.
 */
async function refuseForgery(req: IncomingMessage, session: ViewSession | undefined): Promise<void> {
  if (!session) return;
  refuseOtherSite(req, ['same-origin']);
  const from = req.headers.origin ?? req.headers.referer;
  // `Origin: null` (an opaque origin, or a page that withholds it) does not parse, and is refused with no origin.
  const host = from && URL.canParse(from) ? new URL(from).host : undefined;
  if (host === undefined || host !== req.headers.host) {
    throw new A2rlError(
      'FORBIDDEN',
      `Refused: this request came from ${from ?? 'a page that did not say'}, not from the view; use the view's own pages.`,
    );
  }
  const csrf = new URLSearchParams(await readForm(req)).get('csrf') ?? '';
  if (!safeEqual(session.csrf, csrf)) {
    throw new A2rlError('FORBIDDEN', 'Refused: the form lacks this session’s CSRF token; reload the page and use its own button.');
  }
}

async function readForm(req: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of req) {
    body += String(chunk);
    if (body.length > maxFormBytes)
      throw new A2rlError('TOO_LARGE', `A form to the view holds a CSRF token only (at most ${maxFormBytes} bytes).`);
  }
  return body;
}

function decodePath(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new A2rlError('INVALID_INPUT', `The path "${part}" is not valid percent-encoding; follow the view's own links.`);
  }
}

function errorPage(status: number, message: string): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${status} · a2rl view</title><script src="/view/assets/clean-url.js"></script><style>body{font:16px/1.5 system-ui,sans-serif;margin:2em;max-width:50em;color:#111}</style></head>` +
    `<body><main><h1>${status === 401 ? 'Not authorised' : `Error ${status}`}</h1><p id="error">${escapeHtml(message)}</p></main></body></html>`
  );
}
