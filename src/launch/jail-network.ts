import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Where the jail's endpoint sockets appear inside it (a short path: sockets have a 108-byte limit). */
export const jailNetworkDir = '/run/a2rl/net';

export interface Endpoint {
  host: string;
  port: number;
}

/** A loopback address the forwarder listens on in the jail, and the socket (a path in the jail) it joins each connection to. */
export interface Forward extends Endpoint {
  socket: string;
}

/** What a jail's network lets the agent reach: loopback endpoints at their own address, other hosts through the proxy. */
export interface JailNetworkPlan {
  /** Host-loopback endpoints, forwarded into the jail at the same address. */
  loopback: Endpoint[];
  /** Every endpoint the proxy lets through: the remote ones, and the loopback ones for clients that send everything to the proxy. */
  allowed: Endpoint[];
  /** Whether the agent needs the proxy: some endpoint is not on the loopback. */
  proxy: boolean;
}

export interface JailNetwork {
  /** The host folder of the endpoint sockets, bound into the jail at `jailNetworkDir`. */
  dir: string;
  forwards: Forward[];
  /** The proxy variables the agent gets (none when it needs no proxy, or when the operator gave it a proxy of its own). */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Addresses that reach the host itself (0.0.0.0 does, as a destination on Linux). */
const isLoopback = (host: string) => ['localhost', '::1', '0.0.0.0'].includes(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
const key = (endpoint: Endpoint) => `${endpoint.host.toLowerCase()}:${endpoint.port}`;

/** The endpoints (host and port) the http(s) URLs in `texts` name. */
export function urlEndpoints(texts: readonly string[]): Endpoint[] {
  const found = new Map<string, Endpoint>();
  for (const text of texts) {
    for (const match of text.matchAll(/\bhttps?:\/\/[^\s"'`<>]+/gi)) {
      let url: URL;
      try {
        url = new URL(match[0]);
      } catch {
        continue;
      }
      const endpoint = { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) };
      found.set(key(endpoint), endpoint);
    }
  }
  return [...found.values()];
}

/**
 * What the agent may reach: every endpoint a URL it was given names (its environment's values, the operator's
 * --agent-arg, its run's MCP endpoint) and its provider's hosted API (`apiHosts`, on 443); nothing else.
 */
export function jailNetworkPlan(urlTexts: readonly string[], apiHosts: readonly string[]): JailNetworkPlan {
  const endpoints = new Map<string, Endpoint>();
  for (const endpoint of [...urlEndpoints(urlTexts), ...apiHosts.map((host) => ({ host, port: 443 }))])
    endpoints.set(key(endpoint), endpoint);
  const allowed = [...endpoints.values()];
  const loopback = allowed.filter((endpoint) => isLoopback(endpoint.host));
  return { loopback, allowed, proxy: loopback.length < allowed.length };
}

/** `host:port` of a CONNECT request (`[::1]:443` for IPv6), or undefined. */
function authority(target: string | undefined): Endpoint | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(target ?? '');
  return match ? { host: match[1]!, port: Number(match[2]) } : undefined;
}

const refusal = (endpoint: Endpoint | undefined, target: string | undefined) =>
  `[FORBIDDEN] the agent's jail reaches only its model API and its run's MCP endpoint; ${endpoint ? key(endpoint) : `"${target}"`} is neither. Give the agent the URL of what it needs (--agent-env, --agent-arg) and launch it again.\n`;

/**
 * The host side of a jail's network: for each loopback endpoint a Unix socket that joins each
 * connection to it, and, where the agent needs hosts beyond the loopback, an HTTP proxy (CONNECT
 * for HTTPS, absolute URLs for HTTP) on a socket of its own that lets through only `plan.allowed`.
 * The agent's own environment (`agentEnv`) decides whether it gets the proxy variables: a proxy
 * the operator gave it is left as it is (it is one of its endpoints).
 */
export async function startJailNetwork(plan: JailNetworkPlan, agentEnv: Record<string, string>): Promise<JailNetwork> {
  const dir = mkdtempSync(join(tmpdir(), 'a2rl-net-'));
  const servers: Server[] = [];
  const open = new Set<Socket>();
  const track = (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  };
  const listen = (server: Server, name: string) => {
    servers.push(server);
    return new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(join(dir, name), () => {
        // An accept that fails later (the agent holding every descriptor) is that connection's loss, not the launcher's end.
        server.on('error', () => undefined);
        resolve();
      });
    });
  };
  const isAllowed = (endpoint: Endpoint) => plan.allowed.some((allowed) => key(allowed) === key(endpoint));

  const forwards: Forward[] = [];
  for (const [index, endpoint] of plan.loopback.entries()) {
    const name = `${index}.sock`;
    const server = createServer({ allowHalfOpen: true }, (client) => {
      track(client);
      const upstream = connect({ host: endpoint.host, port: endpoint.port, allowHalfOpen: true });
      track(upstream);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await listen(server, name);
    // "localhost" is both loopback addresses in the jail, whichever the agent's resolver picks.
    for (const host of endpoint.host === 'localhost' ? ['127.0.0.1', '::1'] : [endpoint.host]) {
      // `localhost:8000` and `127.0.0.1:8000` are one address in the jail: the first forward takes it.
      if (!forwards.some((forward) => forward.host === host && forward.port === endpoint.port)) {
        forwards.push({ host, port: endpoint.port, socket: `${jailNetworkDir}/${name}` });
      }
    }
  }

  const env: Record<string, string> = {};
  if (plan.proxy) {
    const proxy = createHttpServer();
    proxy.on('connection', track);
    proxy.on('connect', (request: IncomingMessage, client: Socket, head: Buffer) => {
      // Node takes its own error handler off a CONNECT's socket: without one, an agent's reset would crash the launcher.
      let upstream: Socket | undefined;
      client.on('error', () => upstream?.destroy());
      const target = authority(request.url);
      if (!target || !isAllowed(target)) {
        client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\n${refusal(target, request.url)}`);
        return;
      }
      let established = false;
      const tunnel = connect({ host: target.host, port: target.port }, () => {
        established = true;
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        tunnel.write(head);
        tunnel.pipe(client).pipe(tunnel);
      });
      upstream = tunnel;
      track(tunnel);
      tunnel.on('error', (error) => {
        if (established) client.destroy();
        else client.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n\r\n${error.message}\n`);
      });
    });
    proxy.on('request', (request: IncomingMessage, response: ServerResponse) => {
      let url: URL | undefined;
      try {
        url = new URL(request.url ?? '');
      } catch {
        // An origin-form request: not a proxy request.
      }
      const target = url?.protocol === 'http:' ? { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80) } : undefined;
      if (!url || !target || !isAllowed(target)) {
        response.writeHead(403, { 'content-type': 'text/plain' }).end(refusal(target, request.url));
        return;
      }
      const { 'proxy-connection': _connection, 'proxy-authorization': _authorization, ...headers } = request.headers;
      const upstream = httpRequest({ ...target, method: request.method, path: `${url.pathname}${url.search}`, headers }, (answer) => {
        answer.on('error', () => response.destroy());
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      });
      request.on('error', () => upstream.destroy());
      upstream.on('error', (error) => {
        if (response.headersSent) response.destroy();
        else response.writeHead(502, { 'content-type': 'text/plain' }).end(`${error.message}\n`);
      });
      request.pipe(upstream);
    });
    await listen(proxy, 'proxy.sock');
    // Its address in the jail: a port no forwarded endpoint takes.
    let port = 3128;
    while (forwards.some((forward) => forward.port === port)) port++;
    forwards.push({ host: '127.0.0.1', port, socket: `${jailNetworkDir}/proxy.sock` });
    const ownProxy = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'ALL_PROXY', 'all_proxy'].some((name) => agentEnv[name]);
    if (!ownProxy) {
      const url = `http://127.0.0.1:${port}`;
      Object.assign(env, { HTTPS_PROXY: url, https_proxy: url, HTTP_PROXY: url, http_proxy: url });
      // Loopback endpoints are forwarded at their own address: clients that honour NO_PROXY go there directly.
      if (!agentEnv.NO_PROXY && !agentEnv.no_proxy)
        Object.assign(env, { NO_PROXY: 'localhost,127.0.0.1,::1', no_proxy: 'localhost,127.0.0.1,::1' });
    }
  }

  return {
    dir,
    forwards,
    env,
    close: async () => {
      await Promise.all(
        servers.map(
          (server) =>
            new Promise<void>((resolve) => {
              server.close(() => resolve());
              for (const socket of open) socket.destroy();
            }),
        ),
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
