import { createServer, type IncomingMessage, type Server } from 'node:http';

export interface ChatRequest {
  headers: IncomingMessage['headers'];
  body: { model: string; temperature?: number; messages: Array<{ role: string; content: string }> };
}

/**
 * A real local HTTP server speaking the OpenAI chat completions protocol, standing in for
 * a paid LLM judge. `reply` decides each answer: a status code to fail with, or the text.
 */
export async function startFakeLlm(
  reply: (request: ChatRequest, index: number) => { status: number; headers?: Record<string, string> } | string,
) {
  const requests: ChatRequest[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const request: ChatRequest = { headers: req.headers, body: JSON.parse(raw) };
      requests.push(request);
      const answer = req.url === '/v1/chat/completions' ? reply(request, requests.length - 1) : { status: 404 };
      // A little latency, so concurrent requests overlap.
      setTimeout(() => {
        inFlight--;
        if (typeof answer === 'string') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              id: 'x',
              object: 'chat.completion',
              choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
            }),
          );
        } else {
          res.writeHead(answer.status, answer.headers ?? {});
          res.end(JSON.stringify({ error: { message: 'fake failure' } }));
        }
      }, 20);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    maxInFlight: () => maxInFlight,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
