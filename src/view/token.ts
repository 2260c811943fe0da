import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { adminTokenMatches, bearerToken } from '../mcp/tokens.js';
import { A2rlError } from '../util/errors.js';

/** The environment variable that overrides the stored view token (never passed to an agent: $A2RL_HOME and A2RL_* stay out of its jail). */
export const viewTokenEnv = 'A2RL_VIEW_TOKEN';
/**
 * The cookie that holds a browser's session id ({@link ViewSessions}), set when it opens a login link. Named by the
 * server's port: cookies are shared by all ports of a host, and `serve --http` and `a2rl view` side by side must not
 * overwrite each other's.
 */
export function viewCookie(req: IncomingMessage): string {
  return `a2rl_view_${/:(\d+)$/.exec(req.headers.host ?? '')?.[1] ?? 'default'}`;
}

/**
 * The operator's view token: `$A2RL_VIEW_TOKEN`, or else `$A2RL_HOME/view-token`, made on first use (32 random bytes,
 * mode 0600). It opens the read-only view only: it is neither a run token nor the admin token that creates runs.
 */
export function viewToken(home: string, env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env[viewTokenEnv]?.trim();
  if (fromEnv) return fromEnv;
  const path = join(home, 'view-token');
  mkdirSync(home, { recursive: true });
  try {
    // 'wx': a server and `a2rl view-token` starting at once agree on one token, whichever wrote it.
    writeFileSync(path, `${randomBytes(32).toString('base64url')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const stored = readFileSync(path, 'utf8').trim();
  if (!stored) throw new A2rlError('INVALID_INPUT', `${path} is empty; delete it and a new view token is made.`);
  return stored;
}

/** The view token of a server that also holds `adminToken`: refused if they are one, as the view must not grant creating runs. */
export function viewTokenBeside(home: string, adminToken: string | undefined): string {
  const token = viewToken(home);
  if (adminToken !== undefined && adminTokenMatches(adminToken, token)) {
    throw new A2rlError(
      'INVALID_INPUT',
      `${viewTokenEnv} is the admin token; give the view a token of its own (or unset ${viewTokenEnv} to use $A2RL_HOME/view-token).`,
    );
  }
  return token;
}

/**
 * A one-time login code: when it expires and a nonce, signed with the view token. `a2rl view-token --link` (another
 * process) and the server make codes the server checks with no state shared but the token; a link left in a terminal,
 * a history or a log is dead a minute later, and once used.
 */
export function loginCode(token: string, now = Date.now()): string {
  const body = `${(now + loginCodeTtlMs).toString(36)}.${randomBytes(12).toString('base64url')}`;
  return `${body}.${signature(token, body)}`;
}

/** How long a login code opens the view (once). */
const loginCodeTtlMs = 60_000;

const signature = (token: string, body: string) => createHmac('sha256', token).update(`a2rl-view-login:${body}`).digest('base64url');

/** A browser's session: its id is the cookie's value (never the view token); its CSRF token goes in the pages' forms. */
export interface ViewSession {
  id: string;
  csrf: string;
  /** When its login link was redeemed, and when a request last presented it (ms since the epoch). */
  createdAt: number;
  usedAt: number;
}

/** A session unused this long ends: a cookie left in a browser (or sent to another port of the host) stops opening the view. */
const sessionIdleMs = 12 * 3600_000;
/** A session ends this long after its login, however much it is used. */
const sessionMaxMs = 7 * 24 * 3600_000;

/**
 * The view's browser sessions, in this process's memory only: they end with the server, after {@link sessionIdleMs}
 * unused, or {@link sessionMaxMs} after their login. A session is made only by redeeming a login code, so only a
 * holder of the view token can make one.
 */
export class ViewSessions {
  private readonly sessions = new Map<string, ViewSession>();
  /** The nonces of codes already used, until they expire. */
  private readonly spent = new Map<string, number>();

  constructor(private readonly token: string) {}

  /** A new session for a genuine, unexpired, unused code; otherwise a sentence saying why not and what to do. */
  redeem(code: string, now = Date.now()): ViewSession | string {
    const fresh = 'run a2rl view-token --link <this server’s URL> for a fresh link (it works once, within a minute)';
    const [expiry, nonce, signed] = code.split('.');
    const expiresAt = parseInt(expiry ?? '', 36);
    if (!nonce || !signed || !Number.isFinite(expiresAt) || !safeEqual(signed, signature(this.token, `${expiry}.${nonce}`))) {
      return `That login link is not one this server made (or the view token changed since): ${fresh}.`;
    }
    for (const [used, until] of this.spent) if (until < now) this.spent.delete(used);
    if (expiresAt < now || expiresAt > now + loginCodeTtlMs) return `That login link expired: ${fresh}.`;
    if (this.spent.has(nonce)) return `That login link was used already: ${fresh}.`;
    this.spent.set(nonce, expiresAt);
    for (const [id, session] of this.sessions) if (!live(session, now)) this.sessions.delete(id);
    const session = {
      id: randomBytes(32).toString('base64url'),
      csrf: randomBytes(32).toString('base64url'),
      createdAt: now,
      usedAt: now,
    };
    this.sessions.set(session.id, session);
    return session;
  }

  /** The live session of that id, marked used now; undefined for an unknown or ended one. */
  get(id: string, now = Date.now()): ViewSession | undefined {
    const session = this.sessions.get(id);
    if (!session) return undefined;
    if (!live(session, now)) return void this.sessions.delete(id);
    session.usedAt = now;
    return session;
  }
}

const live = (session: ViewSession, now: number) => now - session.usedAt < sessionIdleMs && now - session.createdAt < sessionMaxMs;

/** Equal strings, compared in constant time for equal lengths (a CSRF token, a signature). */
export function safeEqual(expected: string, presented: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** How a request presented itself: a bearer header (scripts) or the view's session cookie (a browser). */
export function presentedViewCredential(req: IncomingMessage): { token: string } | { sessionId: string } | undefined {
  const header = bearerToken(req.headers.authorization);
  if (header !== undefined) return { token: header };
  const cookie = cookieValue(req.headers.cookie, viewCookie(req));
  return cookie ? { sessionId: cookie } : undefined;
}

export function viewTokenMatches(expected: string, presented: string): boolean {
  return adminTokenMatches(expected, presented);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}
