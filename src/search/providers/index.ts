import { A2rlError } from '../../util/errors.js';
import { lookup } from '../../util/registry.js';
import type { SearchProvider, SearchSettings } from '../provider.js';
import { duckDuckGoProvider } from './duckduckgo.js';
import { localProvider } from './local.js';
import { serpApiProvider } from './serpapi.js';

interface ProviderEntry {
  create(settings: SearchSettings): SearchProvider;
  /** The settings it reads besides the key, each with its flag: another one given is refused rather than ignored. */
  takes: Array<'url' | 'corpus'>;
}

/** The search providers `serve --search` can name. */
export const searchProviders = {
  serpapi: { create: serpApiProvider, takes: ['url'] },
  duckduckgo: { create: duckDuckGoProvider, takes: ['url'] },
  local: { create: localProvider, takes: ['corpus'] },
} as const satisfies Record<string, ProviderEntry>;

export type SearchProviderName = keyof typeof searchProviders;
export const searchProviderNames = Object.keys(searchProviders) as SearchProviderName[];

const flags = { url: '--search-url', corpus: '--search-corpus' } as const;

export function createSearchProvider(settings: SearchSettings): SearchProvider {
  const entry: ProviderEntry = lookup<ProviderEntry>(searchProviders, settings.provider, 'search provider');
  for (const setting of ['url', 'corpus'] as const) {
    if (settings[setting] !== undefined && !entry.takes.includes(setting)) {
      const takers = searchProviderNames.filter((name) => (searchProviders[name].takes as readonly string[]).includes(setting));
      throw new A2rlError(
        'INVALID_INPUT',
        `${flags[setting]} is for --search ${takers.join(' or ')}; drop it for --search ${settings.provider}.`,
      );
    }
  }
  if (settings.url !== undefined && !/^https?:\/\//.test(settings.url)) {
    throw new A2rlError('INVALID_INPUT', `--search-url must be an http(s) URL, e.g. https://serpapi.com/search; got "${settings.url}".`);
  }
  return entry.create(settings);
}
