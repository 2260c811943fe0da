"""Search as upstream's pyserini LuceneSearcher (pyserini 0.17, Anserini over Lucene 8) searches its index, in Python.

    searcher = LuceneBM25("search_engine/resources_1k/documents.jsonl")   # the documents pyserini indexes
    searcher.search("red cotton shirts", k=50)                           # -> the 50 best documents' ids

The stand-in's own index, built in memory from the same documents upstream's index is built from. Both the documents'
"contents" and the query go through Anserini's DefaultEnglishAnalyzer, which is Lucene's EnglishAnalyzer (`analyse`):
StandardTokenizer (Unicode word boundaries, UAX #29: the `regex` module's WORD boundaries), EnglishPossessiveFilter
(a trailing 's dropped), LowerCaseFilter, StopFilter (Lucene's 33 English stop words) and PorterStemFilter (Martin
Porter's reference algorithm, which is NLTK's PorterStemmer in MARTIN_EXTENSIONS mode; Snowball's "porter" is the
published algorithm and differs from Lucene's on -bli, -logi and two-letter words). The query is Anserini's bag of
words: one clause per distinct term, boosted by its count. Scores are Lucene 8's BM25 with pyserini's k1 0.9, b 0.4:
idf log(1 + (N - df + 0.5) / (df + 0.5)), the document's length as Lucene stores it (one byte, SmallFloat.intToByte4,
so long documents share lengths), average length over the true lengths, float32 arithmetic; ties go to the smaller id
(Anserini sorts ties by the id field). Not reproduced: the last bits of Lucene's float summation order.
"""

import functools
import json
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


@functools.lru_cache(maxsize=1 << 20)
def stem(word):
    return PORTER.stem(word, to_lowercase=False)


def analyse(text):
    """The terms Lucene's EnglishAnalyzer makes of text, in order."""
    terms = []
    for token in BOUNDARY.split(text):
        if not WORD_CHARACTER.search(token):
            continue
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
    """search(query, k) -> the k best documents' ids, as pyserini's LuceneSearcher ranks them."""

    def __init__(self, documents_path):
        if not os.path.isfile(documents_path):
            raise FileNotFoundError(f"{documents_path} is missing: the stand-in searches upstream's index documents "
                                    "(search_engine/convert_product_file_format.py's output); prepare the task again")
        self.ids, norms, postings = [], [], defaultdict(lambda: ([], []))
        total = 0
        with open(documents_path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                doc = json.loads(line)
                terms = analyse(doc["contents"])
                for term, count in Counter(terms).items():
                    docs, freqs = postings[term]
                    docs.append(len(self.ids))
                    freqs.append(count)
                self.ids.append(doc["id"])
                norms.append(encode_length(len(terms)))
                total += len(terms)
        n = len(self.ids)
        self.postings = {t: (np.array(d, dtype=np.int64), np.array(f, dtype=np.float32)) for t, (d, f) in postings.items()}
        average = np.float32(total / n) if n else np.float32(1)
        # Lucene's per-norm cache: k1 * (1 - b + b * length / avgdl), in float32.
        cache = (np.float32(K1) * ((np.float32(1 - B)) + np.float32(B) * LENGTH_TABLE.astype(np.float32) / average)).astype(np.float32)
        self.length_factor = cache[np.array(norms, dtype=np.int64)] if n else np.zeros(0, dtype=np.float32)
        self.idf = {t: np.float32(np.log(1 + (n - len(d) + 0.5) / (len(d) + 0.5))) for t, (d, _f) in self.postings.items()}
        self.order = np.argsort(np.array(self.ids, dtype=object), kind="stable") if n else np.zeros(0, dtype=np.int64)
        self.id_rank = np.empty(n, dtype=np.int64)
        self.id_rank[self.order] = np.arange(n)

    def search(self, query, k=10):
        scores = np.zeros(len(self.ids), dtype=np.float64)
        hit = np.zeros(len(self.ids), dtype=bool)
        for term, boost in Counter(analyse(query)).items():
            if term not in self.postings:
                continue
            docs, freqs = self.postings[term]
            weight = np.float32(boost) * self.idf[term]
            scores[docs] += (weight * (freqs / (freqs + self.length_factor[docs]))).astype(np.float32)
            hit[docs] = True
        found = np.flatnonzero(hit)
        final = scores[found].astype(np.float32)
        ranked = found[np.lexsort((self.id_rank[found], -final))]
        return [self.ids[i] for i in ranked[:k]]
