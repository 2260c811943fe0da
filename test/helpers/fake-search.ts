import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a fake provider received: its path and query parameters. */
export interface ProviderRequest {
  path: string;
  params: Record<string, string>;
}

/**
 * A search API on loopback speaking a real provider's protocol, the only kind of test double of an outside service
 * the tests use: SerpAPI's `GET /search?q&api_key&num` → `{organic_results: [{title, link, snippet}]}`, or
 * DuckDuckGo's instant answers `GET /?q&format=json&no_html=1` → `{Heading, AbstractText, AbstractURL, RelatedTopics}`.
 * Its answers are made from the query, so a test can tell which query an answer belongs to. `failWith` makes it
 * answer that HTTP status with a body echoing the request (as a provider's error page may, key included).
 */
export interface FakeProvider {
  url: string;
  requests: ProviderRequest[];
  failWith: number | undefined;
  /** How long it takes to answer, and the most requests it was ever answering at once. */
  delayMs: number;
  mostAtOnce: number;
  close(): Promise<void>;
}

export async function startFakeProvider(kind: 'serpapi' | 'duckduckgo', options: { apiKey?: string } = {}): Promise<FakeProvider> {
  const fake: Omit<FakeProvider, 'url' | 'close'> = { requests: [], failWith: undefined, delayMs: 0, mostAtOnce: 0 };
  let answering = 0;
  const server: Server = createServer(async (request, response) => {
    answering += 1;
    fake.mostAtOnce = Math.max(fake.mostAtOnce, answering);
    if (fake.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, fake.delayMs));
    answering -= 1;
    const url = new URL(request.url ?? '/', 'http://loopback');
    const params = Object.fromEntries(url.searchParams);
    fake.requests.push({ path: url.pathname, params });
    const reply = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (fake.failWith !== undefined) return reply(fake.failWith, { error: `failed: ${request.url}` });
    const q = params.q ?? '';
    if (kind === 'serpapi') {
      if (url.pathname !== '/search') return reply(404, { error: 'no such endpoint' });
      if (options.apiKey !== undefined && params.api_key !== options.apiKey) return reply(401, { error: 'Invalid API key.' });
      const num = Number(params.num ?? 10);
      return reply(200, {
        search_metadata: { status: 'Success' },
        search_parameters: { engine: 'google', q },
        organic_results: Array.from({ length: Math.max(num, 5) }, (_, i) => ({
          position: i + 1,
          title: `${q} — result ${i + 1}`,
          link: `https://example.org/${encodeURIComponent(q)}/${i + 1}`,
          snippet: `snippet ${i + 1} about ${q}`,
        })),
      });
    }
    if (url.pathname !== '/' || params.format !== 'json') return reply(404, { error: 'no such endpoint' });
    return reply(200, {
      Heading: q,
      AbstractText: `abstract about ${q}`,
      AbstractURL: `https://en.wikipedia.org/wiki/${encodeURIComponent(q)}`,
      RelatedTopics: [
        { Text: `${q} topic one - first related topic`, FirstURL: 'https://duckduckgo.com/one' },
        { Name: 'A group', Topics: [{ Text: 'inside a group', FirstURL: 'https://duckduckgo.com/group' }] },
        { Text: `${q} topic two - second related topic`, FirstURL: 'https://duckduckgo.com/two' },
      ],
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const path = kind === 'serpapi' ? '/search' : '/';
  return Object.assign(fake, {
    url: `http://127.0.0.1:${port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
