"""Generate the micro-example data: random lowercase words and their reversals.

    PYTHONPATH=<dir holding microlm and micro_example> python3 generate.py [--out-dir DIR]

Writes DIR/data/train.jsonl (agent-visible) and DIR/eval/{public,private}.jsonl (hidden), DIR
defaulting to this task's folder (microlm.splits). An item: {"word": "lamp", "answer": "pmal"}.
Fill in: your items and how evaluation differs from training (held-out combinations, unseen
entities, ...). The output must be a pure function of SEED: tasks/contract_test.py checks that a
rerun rewrites the shipped files byte for byte. No word appears twice anywhere.
"""

import os
import random
import string

from microlm import splits

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 1234
N_TRAIN, N_PUBLIC, N_PRIVATE = 2000, 200, 200


def generate():
    """(train, public, private) lists of items, all words distinct."""
    rng = random.Random(SEED)
    words = set()
    while len(words) < N_TRAIN + N_PUBLIC + N_PRIVATE:
        words.add("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 7))))
    words = sorted(words)
    rng.shuffle(words)
    items = [{"word": w, "answer": w[::-1]} for w in words]
    return items[:N_TRAIN], items[N_TRAIN : N_TRAIN + N_PUBLIC], items[N_TRAIN + N_PUBLIC :]


if __name__ == "__main__":
    splits.main(__doc__, HERE, generate)
