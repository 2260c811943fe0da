"""Search as upstream's pyserini LuceneSearcher (pyserini 0.17, Anserini over Lucene 8) searches its index, in Python.

    searcher = LuceneBM25("search_engine/resources_1k/documents.jsonl")   # the documents pyserini indexes
    searcher.search("red cotton shirts", k=50)                           # -> the 50 best documents' ids

The stand-in's own index, built in memory from the same documents upstream's index is built from. Both the documents'
"contents" and the query go through Anserini's DefaultEnglishAnalyzer, which is Lucene's EnglishAnalyzer (`analyse`):
StandardTokenizer (Unicode word boundaries, UAX #29: the `regex` module's WORD boundaries; a token longer than 255
characters cut into pieces of 255), EnglishPossessiveFilter (a trailing 's dropped), LowerCaseFilter, StopFilter
(Lucene's 33 English stop words) and PorterStemFilter (Martin Porter's reference algorithm, which is NLTK's
PorterStemmer in MARTIN_EXTENSIONS mode; Snowball's "porter" is the published algorithm and differs from Lucene's on
-bli, -logi and two-letter words). The query is Anserini's bag of words: one clause per distinct term, boosted by its
count. Scores are Lucene 8's BM25Similarity with pyserini's k1 0.9, b 0.4, in Lucene's float32 operations:
idf log(1 + (N - df + 0.5) / (df + 0.5)) over the N documents that have a term, weight boost * idf, a document's
length as Lucene's norms keep it (one byte, SmallFloat.intToByte4, so long documents share lengths), the average over
the true lengths, a term's score weight - weight / (1 + freq * 1 / (k1 * (1 - b + b * length / avgdl))), the clauses
summed in double and rounded to float32; ties go to the smaller id (Anserini sorts ties by the id field). Measured
against Lucene 8.8.1 itself: tasks/hflm-tests/test_webshop_lucene.py.
"""

import functools
import json
import math
import os
from collections import Counter, defaultdict

import numpy as np
import regex
from nltk.stem.porter import PorterStemmer

K1, B = 0.9, 0.4
# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
STOP_WORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then "
                       "there these they this to was will with".split())
BOUNDARY = regex.compile(r"\b", flags=regex.WORD | regex.V1)
WORD_CHARACTER = regex.compile(r"[\p{L}\p{N}]", flags=regex.V1)
POSSESSIVE = ("'s", "'S", "\u2019s", "\u2019S", "\uff07s", "\uff07S")
PORTER = PorterStemmer(PorterStemmer.MARTIN_EXTENSIONS)
MAX_TOKEN_LENGTH = 255  # StandardTokenizer's: a longer token is cut into pieces this long


@functools.lru_cache(maxsize=1 << 20)
def stem(word):
    return PORTER.stem(word, to_lowercase=False)


def analyse(text):
    """The terms Lucene's EnglishAnalyzer makes of text, in order."""
    terms = []
    for word in BOUNDARY.split(text):
        if not WORD_CHARACTER.search(word):
            continue
        for start in range(0, len(word), MAX_TOKEN_LENGTH):
            token = word[start:start + MAX_TOKEN_LENGTH]
            if token.endswith(POSSESSIVE):
                token = token[:-2]
            token = token.lower()
            if token and token not in STOP_WORDS:
                terms.append(stem(token))
    return terms


def _int_to_int4(i):
    """Lucene's SmallFloat.longToInt4: the 4 most significant bits and the shift."""
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_int(i):
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_FREE = 255 - _int_to_int4(2**31 - 1)  # SmallFloat.NUM_FREE_VALUES: lengths below it are stored exactly
# SmallFloat.intToByte4 / byte4ToInt: the length Lucene's norms keep of a document's length.
LENGTH_TABLE = np.array([i if i < _FREE else _FREE + _int4_to_int(i - _FREE) for i in range(256)], dtype=np.float64)


def encode_length(length):
    return length if length < _FREE else _FREE + _int_to_int4(length - _FREE)


class LuceneBM25:
    """search(query, k) -> the k best documents' ids, as pyserini's LuceneSearcher ranks them; scored(query, k) -> the
    same with Lucene's float32 scores."""

    def __init__(self, documents_path):
        if not os.path.isfile(documents_path):
            raise FileNotFoundError(f"{documents_path} is missing: the stand-in searches upstream's index documents "
                                    "(search_engine/convert_product_file_format.py's output); prepare the task again")
        self.ids, norms, postings = [], [], defaultdict(lambda: ([], []))
        total = with_terms = 0
        with open(documents_path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                doc = json.loads(line)
                if not doc["contents"].strip():
                    continue  # Anserini skips a blank document
                terms = analyse(doc["contents"])
                for term, count in Counter(terms).items():
                    docs, freqs = postings[term]
                    docs.append(len(self.ids))
                    freqs.append(count)
                self.ids.append(doc["id"])
                norms.append(encode_length(len(terms)))
                total += len(terms)
                with_terms += bool(terms)
        # Lucene's collection statistics count the documents that have the field, i.e. a term.
        average = np.float32(total / with_terms) if with_terms else np.float32(1)
        one, k1, b = np.float32(1), np.float32(K1), np.float32(B)
        # BM25Similarity's per-norm cache, in its float32 operations: 1 / (k1 * ((1 - b) + b * length / avgdl)).
        inverse = one / (k1 * ((one - b) + b * LENGTH_TABLE.astype(np.float32) / average))
        norm_inverse = inverse[np.array(norms, dtype=np.int64)]
        # Per term: its documents, 1 + freq * normInverse (the query-independent part of a term's score) and its idf.
        self.postings = {}
        for term, (d, f) in postings.items():
            docs = np.array(d, dtype=np.int64)
            self.postings[term] = (docs, one + np.array(f, dtype=np.float32) * norm_inverse[docs],
                                   np.float32(math.log(1 + (with_terms - len(d) + 0.5) / (len(d) + 0.5))))
        self.id_rank = np.empty(len(self.ids), dtype=np.int64)
        self.id_rank[np.argsort(np.array(self.ids, dtype=object), kind="stable")] = np.arange(len(self.ids))

    def scored(self, query, k=10):
        """[(id, score)] of the k best documents for query, best first, ties by id."""
        scores = np.zeros(len(self.ids), dtype=np.float64)  # Lucene sums a document's clauses in double
        hit = np.zeros(len(self.ids), dtype=bool)
        for term, boost in Counter(analyse(query)).items():
            if term not in self.postings:
                continue
            docs, denominator, idf = self.postings[term]
            weight = np.float32(boost) * idf
            scores[docs] += weight - weight / denominator
            hit[docs] = True
        found = np.flatnonzero(hit)
        final = scores[found].astype(np.float32)
        best = np.lexsort((self.id_rank[found], -final))[:k]
        return [(self.ids[found[i]], float(final[i])) for i in best]

    def search(self, query, k=10):
        return [doc_id for doc_id, _score in self.scored(query, k)]
