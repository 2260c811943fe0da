"""The constraint checkers: exactly how the judge decides whether a response obeys each constraint.

    from micro_alpacaeval import constraints
    constraints.check({"type": "bullets", "count": 3}, text)    # -> True / False
    constraints.satisfied(item["constraints"], text)           # -> how many hold
    constraints.describe({"type": "max_words", "count": 12})   # -> the rule in words

Every item of the task carries its constraints as a list of such dicts. The types:

    bullets       {"count": N}  exactly N lines start with "- " (leading spaces ignored)
    numbered      {}            at least 2 lines start with "1. ", "2. ", ... numbered from 1 in order, no "- " line
    one_sentence  {}            a single line ending in . ! or ?, with no other . ! or ? followed by a space
    all_caps      {}            some letters, none of them lowercase
    lowercase     {}            some letters, none of them uppercase
    max_words     {"count": N}  at most N words
    exact_words   {"count": N}  exactly N words
    include       {"word": W}   W appears as a word, in any case
    exclude       {"word": W}   W does not appear as a word, in any case
    formal        {}            the first non-empty line starts with "Dear " (any case), no "!", no contraction
    friendly      {}            at least one "!"

A word is a run of ASCII letters, with apostrophe parts kept (don't, it's): digits,
dashes and list markers are not words. A contraction is a word with an apostrophe.
A response without any word satisfies no constraint at all, so an empty or
punctuation-only answer cannot collect points.
"""

import re

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_NUMBERED = re.compile(r"(\d+)\. ")

TYPES = (
    "bullets", "numbered", "one_sentence", "all_caps", "lowercase",
    "max_words", "exact_words", "include", "exclude", "formal", "friendly",
)
# The extra field each type needs (None: the type takes none).
FIELDS = {
    "bullets": "count", "max_words": "count", "exact_words": "count",
    "include": "word", "exclude": "word",
}

_RULES = {
    "bullets": "exactly {count} lines start with '- '",
    "numbered": "a numbered list: at least 2 lines start with '1. ', '2. ', ... in order, and no line starts with '- '",
    "one_sentence": "one sentence: a single line ending in '.', '!' or '?', with no other sentence end inside",
    "all_caps": "all capital letters: no lowercase letter",
    "lowercase": "lowercase only: no capital letter",
    "max_words": "at most {count} words",
    "exact_words": "exactly {count} words",
    "include": "the word '{word}' appears (any case)",
    "exclude": "the word '{word}' does not appear (any case)",
    "formal": "formal: the first line starts with 'Dear ', no '!' and no contractions",
    "friendly": "friendly: at least one '!'",
}


def words(text):
    """The words of text, in order: runs of letters with apostrophe parts ("Don't" is one word)."""
    return _WORD.findall(text)


def validate(constraint):
    """Raise ValueError unless constraint is a well-formed constraint dict."""
    if not isinstance(constraint, dict) or constraint.get("type") not in TYPES:
        raise ValueError(f"a constraint is a dict with a 'type' among {list(TYPES)}, got {constraint!r}")
    field = FIELDS.get(constraint["type"])
    if field == "count":
        value = constraint.get("count")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{constraint['type']} needs a positive integer 'count', got {constraint!r}")
    elif field == "word":
        value = constraint.get("word")
        if not isinstance(value, str) or words(value) != [value]:
            raise ValueError(f"{constraint['type']} needs a single-word 'word', got {constraint!r}")


def describe(constraint):
    """The rule a constraint stands for, in words, e.g. "at most 12 words"."""
    validate(constraint)
    return _RULES[constraint["type"]].format(**constraint)


def _lines(text):
    return [line.strip() for line in text.split("\n") if line.strip()]


def check(constraint, text):
    """True when text obeys the constraint, by the rules in this module's docstring."""
    validate(constraint)
    kind = constraint["type"]
    found = words(text)
    if not found:
        return False
    lower = [w.lower() for w in found]
    if kind == "bullets":
        return sum(line.startswith("- ") for line in _lines(text)) == constraint["count"]
    if kind == "numbered":
        lines = _lines(text)
        numbers = [int(m.group(1)) for m in map(_NUMBERED.match, lines) if m]
        no_bullets = not any(line.startswith("- ") for line in lines)
        return len(numbers) >= 2 and numbers == list(range(1, len(numbers) + 1)) and no_bullets
    if kind == "one_sentence":
        stripped = text.strip()
        return "\n" not in stripped and stripped[-1] in ".!?" and len(_SENTENCE_END.findall(stripped)) == 1
    if kind == "all_caps":
        return not re.search(r"[a-z]", text)
    if kind == "lowercase":
        return not re.search(r"[A-Z]", text)
    if kind == "max_words":
        return len(found) <= constraint["count"]
    if kind == "exact_words":
        return len(found) == constraint["count"]
    if kind == "include":
        return constraint["word"].lower() in lower
    if kind == "exclude":
        return constraint["word"].lower() not in lower
    if kind == "formal":
        first = _lines(text)[0]
        return first.lower().startswith("dear ") and "!" not in text and not any("'" in w for w in found)
    if kind == "friendly":
        return "!" in text
    raise AssertionError(kind)  # unreachable: validate() knows every type


def satisfied(constraints, text):
    """How many of the constraints text obeys (an int from 0 to len(constraints))."""
    return sum(check(c, text) for c in constraints)


def failed(constraints, text):
    """The constraints text breaks, in order."""
    return [c for c in constraints if not check(c, text)]
