"""The known words: every word the task's instructions and references use.

    from micro_alpacaeval.lexicon import WORDS, known_fraction
    known_fraction("Tea is a warm drnk.", extra=["tea"])   # -> 0.8

The rubric judge's "real words" check uses it: a word counts as real when it is in
WORDS or in the instruction being answered (case-insensitive). lexicon.txt, one
lowercase word a line, is written by the task's generate.py; do not edit it.
"""

import os

from .constraints import words

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lexicon.txt")) as _f:
    WORDS = frozenset(line.strip() for line in _f if line.strip())


def known_fraction(text, extra=()):
    """Share of text's words (see constraints.words) found in WORDS or in extra; 0.0 for no words."""
    found = [w.lower() for w in words(text)]
    if not found:
        return 0.0
    known = WORDS | {w.lower() for w in extra}
    return sum(w in known for w in found) / len(found)
