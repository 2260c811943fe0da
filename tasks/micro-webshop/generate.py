"""Generate the micro-webshop games: training games and out-of-distribution held-out games.

    PYTHONPATH=<dir holding microlm> python3 generate.py [--out-dir DIR]

Writes DIR/data/train.jsonl (agent-visible) and DIR/eval/{public,private}.jsonl (hidden), DIR defaulting to this
task's folder. A game is {"seed": int, "colour": ..., "material": ..., "type": ...}; the environment derives the
size, the budget and the catalogue from the seed. Of the 6 x 5 x 6 = 180 (colour, material, type) products, 12 are
asked for only in public games and 12 only in private ones: no training instruction names them (they may still
appear in training catalogues as other products). Pure function of SEED: a rerun gives byte-identical files.
"""

import itertools
import os
import random

from microlm import splits

HERE = os.path.dirname(os.path.abspath(__file__))

COLOURS = ("red", "blue", "green", "black", "white", "grey")
MATERIALS = ("cotton", "wool", "linen", "silk", "denim")
TYPES = ("shirt", "dress", "coat", "jacket", "sweater", "skirt")
SEED = 20261203
N_TRAIN, N_PUBLIC, N_PRIVATE = 4000, 150, 150
N_HELD_OUT = 12  # products per eval split


def split_products(rng):
    """(train, public, private) lists of (colour, material, type); each held-out split covers every type twice."""
    products = list(itertools.product(COLOURS, MATERIALS, TYPES))
    rng.shuffle(products)
    public, private = [], []
    for t in TYPES:
        of_type = [p for p in products if p[2] == t]
        public += of_type[:2]
        private += of_type[2:4]
    held = set(public) | set(private)
    return [p for p in products if p not in held], public, private


def games(rng, products, n, first_seed):
    out = []
    for k in range(n):
        colour, material, type_ = products[k % len(products)] if k < len(products) else rng.choice(products)
        out.append({"seed": first_seed + k, "colour": colour, "material": material, "type": type_})
    rng.shuffle(out)
    return out


def generate():
    rng = random.Random(SEED)
    train_products, public_products, private_products = split_products(rng)
    assert len(public_products) == len(private_products) == N_HELD_OUT
    return (
        games(rng, train_products, N_TRAIN, 0),
        games(rng, public_products, N_PUBLIC, 1_000_000),
        games(rng, private_products, N_PRIVATE, 2_000_000),
    )


if __name__ == "__main__":
    splits.main(__doc__, HERE, generate, noun="games")
