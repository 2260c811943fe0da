/**
 * A SerpAPI test double on loopback in a process of its own (test/helpers/fake-search.ts), for the search bench: the
 * direct call and the call through a2rl's server then reach the same provider, which shares no event loop with either.
 * Prints its URL on the first line of stdout and answers until killed.
 */
import { startFakeProvider } from '../test/helpers/fake-search.js';

const provider = await startFakeProvider('serpapi');
// Keeps no log of what it answered: the bench makes thousands of calls.
provider.requests.push = () => 0;
process.stdout.write(`${provider.url}\n`);
