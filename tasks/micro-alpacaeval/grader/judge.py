"""The rubric judge of micro-alpacaeval: which of two responses to an instruction is better.

    PYTHONPATH=<dir holding micro_alpacaeval> python3 judge.py --pairs PAIRS.jsonl --out VERDICTS.jsonl

PAIRS.jsonl holds one pair a line:
    {"id": ..., "instruction": ..., "constraints": [...], "output_a": ..., "output_b": ...}
VERDICTS.jsonl gets one verdict a line, in the same order:
    {"id": ..., "preference": "a" | "b" | "tie", "score_a": x, "score_b": y}

Each response gets a score:
    score = 10 * (constraints satisfied / constraints) + quality,   quality in [0, 1]
with the constraints checked exactly by micro_alpacaeval.constraints, and quality
the mean of five soft checks:
    ends       the response ends with . ! or ?
    no_loops   no line is repeated and no sequence of 4 words occurs twice
    real       share of words that are real (micro_alpacaeval.lexicon, or in the instruction),
               divided by 0.9 and capped at 1
    length     3 to 60 words and at most 400 characters
    clean      only letters, digits, spaces, newlines and . , ! ? ' - : ; "
A response without any word scores 0. The higher score is preferred; scores less
than TIE_MARGIN apart are a tie. So one more satisfied constraint always beats
any difference in quality.

The judge is symmetric: swapping output_a and output_b swaps the verdict. It
judges each pair as given; the server sends every comparison in both orders
(the candidate first, then the reference first) because other judges, such as
an LLM, may favour a position. Deterministic: same pairs, same verdicts.
Malformed input exits with status 2 and the reason on stderr, writing nothing.
"""

import argparse
import json
import re
import sys

from micro_alpacaeval.constraints import satisfied, validate, words
from micro_alpacaeval.lexicon import known_fraction

JUDGE_VERSION = "micro-alpacaeval-rubric-1"
CONSTRAINT_WEIGHT = 10.0
TIE_MARGIN = 0.1
REAL_WORDS_FULL = 0.9  # this share of real words earns the whole "real" check
MIN_WORDS, MAX_WORDS, MAX_CHARS = 3, 60, 400
_CLEAN = re.compile(r"[A-Za-z0-9 \n.,!?'\-:;\"]*")


def quality_checks(instruction, text):
    """The five soft checks, each in [0, 1] (see the module docstring)."""
    found = [w.lower() for w in words(text)]
    lines = [line.strip().lower() for line in text.split("\n") if line.strip()]
    grams = [tuple(found[i : i + 4]) for i in range(len(found) - 3)]
    return {
        "ends": float(text.rstrip()[-1:] in (".", "!", "?")),
        "no_loops": float(len(set(lines)) == len(lines) and len(set(grams)) == len(grams)),
        "real": min(1.0, known_fraction(text, extra=words(instruction)) / REAL_WORDS_FULL),
        "length": float(MIN_WORDS <= len(found) <= MAX_WORDS and len(text) <= MAX_CHARS),
        "clean": float(_CLEAN.fullmatch(text) is not None),
    }


def score(instruction, constraints, text):
    """A response's score: CONSTRAINT_WEIGHT times the share of constraints met, plus its quality."""
    if not words(text):
        return 0.0
    checks = quality_checks(instruction, text)
    met = satisfied(constraints, text) / len(constraints) if constraints else 1.0
    return CONSTRAINT_WEIGHT * met + sum(checks.values()) / len(checks)


def judge(pair):
    """The verdict on one pair: {"id", "preference", "score_a", "score_b"}."""
    a = score(pair["instruction"], pair["constraints"], pair["output_a"])
    b = score(pair["instruction"], pair["constraints"], pair["output_b"])
    preference = "tie" if abs(a - b) < TIE_MARGIN else "a" if a > b else "b"
    return {"id": pair["id"], "preference": preference, "score_a": round(a, 4), "score_b": round(b, 4)}


def read_pairs(path):
    """The pairs of a PAIRS.jsonl file; raises ValueError saying which line is wrong."""
    pairs = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                pair = json.loads(line)
                if not isinstance(pair, dict):
                    raise ValueError("not a JSON object")
                for key in ("instruction", "output_a", "output_b"):
                    if not isinstance(pair.get(key), str):
                        raise ValueError(f"{key} must be a string")
                if "id" not in pair:
                    raise ValueError("id is missing")
                if not isinstance(pair.get("constraints"), list):
                    raise ValueError("constraints must be a list")
                for constraint in pair["constraints"]:
                    validate(constraint)
            except ValueError as e:
                raise ValueError(f"{path} line {number}: {e}") from None
            pairs.append(pair)
    return pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", required=True, help="JSONL of {id, instruction, constraints, output_a, output_b}")
    parser.add_argument("--out", required=True, help="where to write the verdicts (JSONL)")
    args = parser.parse_args()
    try:
        pairs = read_pairs(args.pairs)
    except (OSError, ValueError) as e:
        print(f"bad pairs: {e}", file=sys.stderr)
        sys.exit(2)
    verdicts = [judge(pair) for pair in pairs]
    with open(args.out, "w") as f:
        for verdict in verdicts:
            f.write(json.dumps(verdict) + "\n")


if __name__ == "__main__":
    main()
