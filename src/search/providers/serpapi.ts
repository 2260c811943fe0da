import { A2rlError } from '../../util/errors.js';
import { fetchJson, type SearchProvider, type SearchResult, type SearchSettings, text } from '../provider.js';

export const serpApiUrl = 'https://serpapi.com/search';

/**
 * SerpAPI's Google results, as DeepSearchQA's reference asks for them (`q`, `api_key`, `num`): the organic results'
 * title, snippet and link.
 */
export function serpApiProvider(settings: SearchSettings): SearchProvider {
  const { apiKey } = settings;
  if (!apiKey) {
    throw new A2rlError(
      'INVALID_INPUT',
      `--search serpapi needs an API key in the environment variable ${settings.keyEnv ?? 'named by --search-key-env'}; set it, or use --search duckduckgo or --search local.`,
    );
  }
  const endpoint = settings.url ?? serpApiUrl;
  return {
    name: 'serpapi',
    cacheId: `serpapi@${endpoint}`,
    async search(query, topK, signal) {
      const url = new URL(endpoint);
      url.searchParams.set('q', query);
      url.searchParams.set('num', String(topK));
      url.searchParams.set('api_key', apiKey);
      const body = (await fetchJson('serpapi', url, signal)) as { organic_results?: unknown };
      const organic = Array.isArray(body.organic_results) ? (body.organic_results as Record<string, unknown>[]) : [];
      return organic
        .slice(0, topK)
        .map((hit): SearchResult => ({ title: text(hit.title), snippet: text(hit.snippet), url: text(hit.link) }));
    },
  };
}
