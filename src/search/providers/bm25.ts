import { A2rlError } from '../../util/errors.js';
import type { SearchResult } from '../provider.js';

export interface CorpusDocument {
  title: string;
  text: string;
  url: string;
}

/** BM25's usual constants (Robertson and Zaragoza): term-frequency saturation and length normalisation. */
const k1 = 1.2;
const b = 0.75;
/** How much of a document's text a result carries. */
const snippetChars = 300;
// A query's distinct terms scored: a long query of common words would otherwise walk most of the corpus once per
// word, holding the search thread (and every run's queries behind it).
const maxQueryTerms = 32;

const tokens = (text: string): string[] => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

/** The corpus's documents (JSONL, one `{"title", "text", "url"}` per line), or the line that is not one, named. */
export function parseCorpus(raw: string, corpus: string): CorpusDocument[] {
  const documents: CorpusDocument[] = [];
  raw.split('\n').forEach((line, index) => {
    if (line.trim() !== '') documents.push(parseLine(line, index + 1, corpus));
  });
  if (documents.length === 0)
    throw new A2rlError(
      'INVALID_INPUT',
      `The search corpus ${corpus} holds no documents; give a JSONL file with one {"title", "text", "url"} per line.`,
    );
  return documents;
}

/** A BM25 index over the documents, title and text together; ties keep the corpus's order. */
export class Bm25Index {
  private readonly postings = new Map<string, Array<{ doc: number; tf: number }>>();
  private readonly lengths: number[] = [];
  private readonly averageLength: number;

  constructor(private readonly documents: CorpusDocument[]) {
    documents.forEach((doc, index) => {
      const terms = tokens(`${doc.title} ${doc.text}`);
      const counts = new Map<string, number>();
      for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
      for (const [term, tf] of counts) {
        if (!this.postings.has(term)) this.postings.set(term, []);
        this.postings.get(term)!.push({ doc: index, tf });
      }
      this.lengths.push(terms.length);
    });
    this.averageLength = this.lengths.reduce((sum, length) => sum + length, 0) / documents.length;
  }

  search(query: string, topK: number): SearchResult[] {
    const scores = new Map<number, number>();
    for (const term of [...new Set(tokens(query))].slice(0, maxQueryTerms)) {
      const hits = this.postings.get(term) ?? [];
      const idf = Math.log(1 + (this.documents.length - hits.length + 0.5) / (hits.length + 0.5));
      for (const { doc, tf } of hits) {
        const norm = tf + k1 * (1 - b + (b * this.lengths[doc]!) / this.averageLength);
        scores.set(doc, (scores.get(doc) ?? 0) + (idf * tf * (k1 + 1)) / norm);
      }
    }
    return [...scores]
      .sort(([docA, a], [docB, bScore]) => bScore - a || docA - docB)
      .slice(0, topK)
      .map(([doc]): SearchResult => {
        const { title, text, url } = this.documents[doc]!;
        return { title, snippet: text.length > snippetChars ? `${text.slice(0, snippetChars)}…` : text, url };
      });
  }
}

function parseLine(line: string, lineNumber: number, corpus: string): CorpusDocument {
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
