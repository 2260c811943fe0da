"""The fixed corpus of fictional entities and its BM25 index, built once at import (a pure function of SEED).

Entities: 600 people, 240 companies, 60 cities, 8 regions, each with a one-word pronounceable name.
Every entity has one document listing its relations, each relation phrase followed by the linked entity:

    person   born in <city>; lives in <city>; works at <company>
    company  run by <person>; based in <city>; founded by <person>
    city     part of <region>; twin of <city>; mayor <person>
    region   capital <city>

A document lists its relations in this order, the same for every entity of a kind. `search(query)` ranks
documents with BM25 (k1 1.2, b 0.75) over their words; the title counts twice, and relation words
and question words are stopwords, so a question retrieves the documents of the entity it names first.
"""

import math
import random
import re

SEED = 7177
N_PEOPLE, N_COMPANIES, N_CITIES, N_REGIONS = 600, 240, 60, 8

RELATIONS = {
    "person": (("born in", "city"), ("lives in", "city"), ("works at", "company")),
    "company": (("run by", "person"), ("based in", "city"), ("founded by", "person")),
    "city": (("part of", "region"), ("twin of", "city"), ("mayor", "person")),
    "region": (("capital", "city"),),
}

STOPWORDS = set(
    "a an the of in at by is was who which where what did does do to for and or on city region company person "
    "works work worked born lives live living based founded founder found run runs part twin mayor capital "
    "employer employs birth home hometown town headquartered headquarters head firm".split()
)

_CONS = "bdfgklmnprstvz"
_VOWS = "aeiou"
_ENDS = ["", "", "n", "r", "l", "s", "x", "k"]


def _names(rng, count, taken):
    out = []
    while len(out) < count:
        n = rng.choice([2, 2, 3])
        word = "".join(rng.choice(_CONS) + rng.choice(_VOWS) for _ in range(n)) + rng.choice(_ENDS)
        word = word.capitalize()
        if 4 <= len(word) <= 7 and word.lower() not in taken and word.lower() not in STOPWORDS:
            taken.add(word.lower())
            out.append(word)
    return out


def _build():
    rng = random.Random(SEED)
    taken = set()
    kinds = {}
    people = _names(rng, N_PEOPLE, taken)
    companies = _names(rng, N_COMPANIES, taken)
    cities = _names(rng, N_CITIES, taken)
    regions = _names(rng, N_REGIONS, taken)
    for kind, names in (("person", people), ("company", companies), ("city", cities), ("region", regions)):
        for name in names:
            kinds[name] = kind
    facts = {}
    for p in people:
        born = rng.choice(cities)
        facts[p] = {"works at": rng.choice(companies), "born in": born, "lives in": rng.choice([c for c in cities if c != born])}
    founders = rng.sample(people, N_COMPANIES)
    for c, f in zip(companies, founders):
        facts[c] = {"based in": rng.choice(cities), "founded by": f, "run by": rng.choice([p for p in people if p != f])}
    for i, c in enumerate(cities):
        facts[c] = {"part of": regions[i % N_REGIONS], "twin of": rng.choice([o for o in cities if o != c]), "mayor": rng.choice(people)}
    for r in regions:
        facts[r] = {"capital": rng.choice([c for c in cities if facts[c]["part of"] == r])}
    order = {name: [rel for rel, _ in RELATIONS[kinds[name]]] for name in people + companies + cities + regions}
    return people, companies, cities, regions, kinds, facts, order


PEOPLE, COMPANIES, CITIES, REGIONS, KIND, FACTS, ORDER = _build()
NAMES = PEOPLE + COMPANIES + CITIES + REGIONS
_BY_LOWER = {n.lower(): n for n in NAMES}

_WORD = re.compile(r"[a-z0-9]+")


def tokens(text):
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def _index():
    postings, lengths = {}, {}
    for name in NAMES:
        words = tokens(name) * 2 + tokens(" ".join(FACTS[name].values()))
        lengths[name] = len(words)
        for w in words:
            postings.setdefault(w, {})
            postings[w][name] = postings[w].get(name, 0) + 1
    n = len(NAMES)
    idf = {w: math.log(1 + (n - len(d) + 0.5) / (len(d) + 0.5)) for w, d in postings.items()}
    return postings, lengths, idf, sum(lengths.values()) / n


_POSTINGS, _LENGTHS, _IDF, _AVGDL = _index()
_RANK = {name: i for i, name in enumerate(NAMES)}


def search(query, k=3, k1=1.2, b=0.75):
    """Titles of the top-k documents for query by BM25 (ties: corpus order); [] when no word matches."""
    scores = {}
    for w in set(tokens(query)):
        for name, tf in _POSTINGS.get(w, {}).items():
            denom = tf + k1 * (1 - b + b * _LENGTHS[name] / _AVGDL)
            scores[name] = scores.get(name, 0.0) + _IDF[w] * tf * (k1 + 1) / denom
    return sorted(scores, key=lambda n: (-scores[n], _RANK[n]))[:k]


def entity(text):
    """The entity named exactly (case-insensitively) by text, else None."""
    return _BY_LOWER.get(text.strip().lower())
