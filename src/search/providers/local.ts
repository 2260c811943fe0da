import { readFileSync } from 'node:fs';
import { A2rlError } from '../../util/errors.js';
import { sha256 } from '../../util/hashing.js';
import type { SearchProvider, SearchResult, SearchSettings } from '../provider.js';

interface Document {
  title: string;
  text: string;
  url: string;
  length: number;
}

/** BM25's usual constants (Robertson and Zaragoza): term-frequency saturation and length normalisation. */
const k1 = 1.2;
const b = 0.75;
/** How much of a document's text a result carries. */
const snippetChars = 300;
// A query's distinct terms scored: the scoring runs on the server's loop, and a long query of common words would
// otherwise walk most of the corpus once per word.
const maxQueryTerms = 32;

const tokens = (text: string): string[] => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

/**
 * A BM25 index over a corpus on disk (JSONL, one `{"title", "text", "url"}` per line), for hosts with no search API
 * or runs that must not depend on one. Title and text are indexed together; ties keep the corpus's order.
 */
export function localProvider(settings: SearchSettings): SearchProvider {
  if (!settings.corpus) {
    throw new A2rlError(
      'INVALID_INPUT',
      '--search local needs --search-corpus FILE: a JSONL file with one {"title", "text", "url"} per line.',
    );
  }
  let raw: string;
  try {
    raw = readFileSync(settings.corpus, 'utf8');
  } catch (error) {
    throw new A2rlError(
      'NOT_FOUND',
      `Cannot read the search corpus ${settings.corpus} (${(error as Error).message}); give an existing JSONL file to --search-corpus.`,
    );
  }
  const documents: Document[] = [];
  const postings = new Map<string, Array<{ doc: number; tf: number }>>();
  raw.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const doc = parseLine(line, index + 1, settings.corpus!);
    const terms = tokens(`${doc.title} ${doc.text}`);
    const counts = new Map<string, number>();
    for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
    for (const [term, tf] of counts) {
      if (!postings.has(term)) postings.set(term, []);
      postings.get(term)!.push({ doc: documents.length, tf });
    }
    documents.push({ ...doc, length: terms.length });
  });
  if (documents.length === 0)
    throw new A2rlError(
      'INVALID_INPUT',
      `The search corpus ${settings.corpus} holds no documents; give a JSONL file with one {"title", "text", "url"} per line.`,
    );
  const averageLength = documents.reduce((sum, doc) => sum + doc.length, 0) / documents.length;
  return {
    name: 'local',
    cacheId: `local@${sha256(raw)}`,
    async search(query, topK) {
      const scores = new Map<number, number>();
      for (const term of [...new Set(tokens(query))].slice(0, maxQueryTerms)) {
        const hits = postings.get(term) ?? [];
        const idf = Math.log(1 + (documents.length - hits.length + 0.5) / (hits.length + 0.5));
        for (const { doc, tf } of hits) {
          const norm = tf + k1 * (1 - b + (b * documents[doc]!.length) / averageLength);
          scores.set(doc, (scores.get(doc) ?? 0) + (idf * tf * (k1 + 1)) / norm);
        }
      }
      return [...scores]
        .sort(([docA, a], [docB, bScore]) => bScore - a || docA - docB)
        .slice(0, topK)
        .map(([doc]): SearchResult => {
          const { title, text, url } = documents[doc]!;
          return { title, snippet: text.length > snippetChars ? `${text.slice(0, snippetChars)}…` : text, url };
        });
    },
  };
}

function parseLine(line: string, lineNumber: number, corpus: string): Omit<Document, 'length'> {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    value = undefined;
  }
  const doc = value as Record<string, unknown> | undefined;
  if (
    !doc ||
    typeof doc !== 'object' ||
    typeof doc.title !== 'string' ||
    typeof doc.text !== 'string' ||
    (doc.url !== undefined && typeof doc.url !== 'string')
  ) {
    throw new A2rlError(
      'INVALID_INPUT',
      `Line ${lineNumber} of the search corpus ${corpus} is not a JSON object with string "title" and "text" (and optionally "url"); fix or remove it.`,
    );
  }
  return { title: doc.title, text: doc.text, url: typeof doc.url === 'string' ? doc.url : '' };
}
