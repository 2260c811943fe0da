import { type IncomingHttpHeaders, type IncomingMessage, request, type ServerResponse } from 'node:http';

/**
 * Headers of one hop, never forwarded (RFC 9110, 7.6.1). `Transfer-Encoding` is kept: a chunked body is forwarded
 * chunked again (Node frames it), where dropping it would send a GET's or DELETE's body unframed, its bytes read as
 * the next request.
 */
const hopHeaders = new Set(['connection', 'keep-alive', 'upgrade', 'proxy-connection', 'te', 'trailer']);

const endToEnd = (headers: IncomingHttpHeaders) => Object.fromEntries(Object.entries(headers).filter(([name]) => !hopHeaders.has(name)));

/**
 * Passes `req` to the HTTP server on the Unix socket `socketPath` and streams its answer back as it comes (a live
 * page's pushes included); `failed` words the 502 when that server cannot answer. The answer closes the client's
 * connection: its next request comes on a new one, which the front door gives to whoever serves it
 * (src/mcp/transports/http/front-door.ts), so a connection never stays with the process that only forwards for it.
 */
export function forward(req: IncomingMessage, res: ServerResponse, socketPath: string, failed: (error: Error) => string): void {
  // No Host of its own: a request that came without one reaches the other side without one, to be refused there too.
  const upstream = request({ socketPath, method: req.method, path: req.url, headers: endToEnd(req.headers), setHost: false }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, { ...endToEnd(answer.headers), Connection: 'close' });
    res.flushHeaders();
    answer.pipe(res);
  });
  upstream.on('error', (error) => {
    if (res.headersSent) return void res.destroy();
    res.writeHead(502, { 'Content-Type': 'text/plain; charset=utf-8', Connection: 'close' }).end(failed(error));
  });
  // A page closed before its answer ended (a live page left): the other side is closed too.
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
}
