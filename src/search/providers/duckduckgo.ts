import { fetchJson, type SearchProvider, type SearchResult, type SearchSettings, text } from '../provider.js';

export const duckDuckGoUrl = 'https://api.duckduckgo.com/';

/**
 * DuckDuckGo's instant-answer API (no key), DeepSearchQA's reference fallback: the abstract first where there is one,
 * then the related topics that carry text (topic groups, which carry none, are skipped as the reference skips them).
 */
export function duckDuckGoProvider(settings: SearchSettings): SearchProvider {
  const endpoint = settings.url ?? duckDuckGoUrl;
  return {
    name: 'duckduckgo',
    cacheId: `duckduckgo@${endpoint}`,
    async search(query, topK, signal) {
      const url = new URL(endpoint);
      url.searchParams.set('q', query);
      url.searchParams.set('format', 'json');
      url.searchParams.set('no_html', '1');
      const body = (await fetchJson('duckduckgo', url, signal)) as Record<string, unknown>;
      const results: SearchResult[] = [];
      const abstract = text(body.AbstractText);
      if (abstract) results.push({ title: text(body.Heading), snippet: abstract, url: text(body.AbstractURL) });
      const related = Array.isArray(body.RelatedTopics) ? (body.RelatedTopics as Record<string, unknown>[]) : [];
      for (const topic of related) {
        const snippet = text(topic?.Text);
        // A topic's text starts with its name; the part before the first ' - ' is the closest thing to a title.
        if (snippet) results.push({ title: snippet.split(' - ')[0]!, snippet, url: text(topic.FirstURL) });
      }
      return results.slice(0, topK);
    },
  };
}
