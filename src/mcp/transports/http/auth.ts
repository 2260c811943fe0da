import type { IncomingMessage, ServerResponse } from 'node:http';
import { A2rlError } from '../../../util/errors.js';
import { adminTokenMatches, bearerToken, type RunTokenCache } from '../../tokens.js';

const loopbackNames = ['localhost', '127.0.0.1', '[::1]'];
export const wildcardHosts = ['0.0.0.0', '::', '[::]'];

export function isLoopback(host: string): boolean {
  return loopbackNames.includes(host) || host === '::1' || host.startsWith('127.');
}

/**
 * DNS-rebinding protection: requests must name this server (loopback, the address it listens
 * on, or a name the operator allowed) in Host, and in Origin when a browser sends one.
 */
export class HostGuard {
  readonly allowedHosts: Set<string>;

  constructor(listenHost: string, allowHosts: string[]) {
    this.allowedHosts = new Set([...loopbackNames, ...allowHosts.map((h) => h.toLowerCase())]);
    if (!wildcardHosts.includes(listenHost)) this.allowedHosts.add(urlHost(listenHost));
  }

  check(req: IncomingMessage): void {
    const host = hostnameOf(`http://${req.headers.host ?? ''}`);
    if (host === undefined || !this.allowedHosts.has(host)) {
      throw new A2rlError(
        'FORBIDDEN',
        `Host "${req.headers.host ?? ''}" is not served here (DNS-rebinding protection); the operator can allow it with --allow-host.`,
      );
    }
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null' && !this.allowedHosts.has(hostnameOf(origin) ?? '')) {
      throw new A2rlError('FORBIDDEN', `Origin "${origin}" is not allowed; the operator can allow its host with --allow-host.`);
    }
  }

  /** The check for the view's servers: a refusal answered `403` in plain text (a browser's page); true when refused. */
  refused(req: IncomingMessage, res: ServerResponse): boolean {
    try {
      this.check(req);
      return false;
    } catch (error) {
      res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8' }).end((error as Error).message);
      return true;
    }
  }
}

/** The run the request's bearer token opens. */
export function authenticateRun(tokens: RunTokenCache, req: IncomingMessage): string {
  const token = bearerToken(req.headers.authorization);
  if (token === undefined) {
    throw new A2rlError(
      'UNAUTHORIZED',
      'Send "Authorization: Bearer <run token>"; an operator creates runs and tokens with a2rl runs create.',
    );
  }
  const runId = tokens.runOf(token);
  if (runId === undefined)
    throw new A2rlError('UNAUTHORIZED', 'The bearer token is not valid: unknown or revoked. Ask the operator for a token.');
  return runId;
}

/** Checks the admin token that `POST /runs` needs; refused when the server has none. */
export function authenticateAdmin(adminToken: string | undefined, req: IncomingMessage): void {
  if (adminToken === undefined) {
    throw new A2rlError(
      'FORBIDDEN',
      'Creating runs over HTTP is off: start the server with A2RL_ADMIN_TOKEN set, or use a2rl runs create.',
    );
  }
  const presented = bearerToken(req.headers.authorization);
  if (presented === undefined || !adminTokenMatches(adminToken, presented)) {
    throw new A2rlError('UNAUTHORIZED', 'POST /runs needs "Authorization: Bearer <admin token>".');
  }
}

/** A host as it appears in a URL: IPv6 addresses bracketed, lower case. */
export function urlHost(host: string): string {
  return (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host).toLowerCase();
}

function hostnameOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase() || undefined;
  } catch {
    return undefined;
  }
}
