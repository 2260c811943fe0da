/** One search hit as the sandbox receives it, whatever the provider. */
export interface SearchResult {
  title: string;
  snippet: string;
  url: string;
}

/**
 * A search backend the server calls on the sandbox's behalf. Providers run only in the server: the sandbox has no
 * network, and a provider's key never leaves the process that holds it.
 */
export interface SearchProvider {
  /** The registry name (`serpapi`, `duckduckgo`, `local`). */
  readonly name: string;
  /**
   * What the query cache keys results by besides the query: the name and whatever changes the answers (the endpoint,
   * the corpus's hash), never the key. A fake endpoint's answers never stand in for the real one's.
   */
  readonly cacheId: string;
  /** At most `topK` results for `query`; throws a {@link SearchProviderError} when the provider fails. */
  search(query: string, topK: number, signal: AbortSignal): Promise<SearchResult[]>;
  /** Stops what the provider runs beside the server's thread (the local index's worker); queries waiting fail. */
  close?(): Promise<void>;
}

/** How the operator configured search (`serve --search …`). */
export interface SearchSettings {
  provider: string;
  /** The provider's API key, read from the environment variable `--search-key-env` names. */
  apiKey?: string;
  /** The name of that variable, for messages (the key itself is never printed). */
  keyEnv?: string;
  /** An HTTP provider's endpoint, where not the public one (a proxy, a test double on loopback). */
  url?: string;
  /** The local provider's corpus: a JSONL file of `{title, text, url}`. */
  corpus?: string;
}

/**
 * A provider's failure, with a message safe for the sandbox: it never carries the request's URL (which holds the key)
 * nor the provider's body.
 */
export class SearchProviderError extends Error {
  override readonly name = 'SearchProviderError';
}

/** Fetches `url` as JSON within the signal's time, turning every failure into a {@link SearchProviderError} that names only `provider`. */
export async function fetchJson(provider: string, url: URL, signal: AbortSignal): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(url, { signal, headers: { accept: 'application/json' } });
  } catch (error) {
    const why = signal.aborted ? 'did not answer in time' : 'could not be reached';
    throw new SearchProviderError(`${provider} ${why}`, { cause: error });
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new SearchProviderError(`${provider} answered HTTP ${response.status}`);
  }
  try {
    return await response.json();
  } catch (error) {
    throw new SearchProviderError(`${provider} answered something that is not JSON`, { cause: error });
  }
}

/** A field of a provider's JSON that should be a string, as one (anything else becomes ''). */
export function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}
