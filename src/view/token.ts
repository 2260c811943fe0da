import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { adminTokenMatches, bearerToken } from '../mcp/tokens.js';
import { A2rlError } from '../util/errors.js';

/** The environment variable that overrides the stored view token (never passed to an agent: $A2RL_HOME and A2RL_* stay out of its jail). */
export const viewTokenEnv = 'A2RL_VIEW_TOKEN';
/** The cookie a browser keeps the view token in once it opened `/view?token=`. */
export const viewCookie = 'a2rl_view';

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

/** How a request presented a token: `?token=` (a link the operator opened), the view's cookie, or a bearer header. */
export function presentedViewToken(req: IncomingMessage, url: URL): { token: string; via: 'query' | 'cookie' | 'header' } | undefined {
  const query = url.searchParams.get('token');
  if (query) return { token: query, via: 'query' };
  const cookie = cookieValue(req.headers.cookie, viewCookie);
  if (cookie) return { token: cookie, via: 'cookie' };
  const header = bearerToken(req.headers.authorization);
  return header === undefined ? undefined : { token: header, via: 'header' };
}

export function viewTokenMatches(expected: string, presented: string): boolean {
  return adminTokenMatches(expected, presented);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return decodeURIComponent(value.join('='));
  }
  return undefined;
}
