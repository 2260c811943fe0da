import { createServer, type IncomingMessage, type Server } from 'node:http';

export interface ChatRequest {
  headers: IncomingMessage['headers'];
  body: { model: string; temperature?: number; messages: Array<{ role: string; content: string }> } & Record<string, unknown>;
}

/** A whole choice to answer with (a tool call, log-probabilities), beside index and finish_reason. */
export interface FakeChoice {
  choice: Record<string, unknown>;
}

/**
 * A real local HTTP server speaking the OpenAI chat completions protocol, standing in for
 * a paid LLM judge. `reply` decides each answer: a status code to fail with, the text, or a whole choice.
 */
export async function startFakeLlm(
  reply: (request: ChatRequest, index: number) => { status: number; headers?: Record<string, string> } | string | FakeChoice,
) {
  const requests: ChatRequest[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      let body: ChatRequest['body'];
      try {
        body = JSON.parse(raw) as ChatRequest['body'];
      } catch {
        // As a real endpoint answers a body that is not JSON (a request its client gave up on while sending, say).
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'the body is not JSON' } }));
        return;
      }
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const request: ChatRequest = { headers: req.headers, body };
      requests.push(request);
      const answer = req.url === '/v1/chat/completions' ? reply(request, requests.length - 1) : { status: 404 };
      // A little latency, so concurrent requests overlap.
      setTimeout(() => {
        inFlight--;
        if (typeof answer === 'string' || 'choice' in answer) {
          const choice = typeof answer === 'string' ? { message: { role: 'assistant', content: answer } } : answer.choice;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, finish_reason: 'stop', ...choice }] }));
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
