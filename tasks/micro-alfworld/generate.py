"""Generate the micro-alfworld games: training games and held-out evaluation games.

    PYTHONPATH=<dir holding microlm> python3 generate.py [--out-dir DIR]

Writes DIR/data/train.jsonl (agent-visible) and DIR/eval/{public,private}.jsonl (hidden), DIR defaulting
to this task's folder. A game is {"seed": int, "task_type": str, "object": str, "destination": str}; the
environment builds the layout from the seed. Out of distribution like ALFWorld's valid_unseen: 22% of the
(task type, object, destination) goal combinations are held out for evaluation only, and evaluation seeds
(layouts) come from a range the training games never use. Task types are balanced in every file. The output
is a pure function of SEED: a rerun gives byte-identical files.
"""

import os
import random
import sys

from microlm import splits

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "env"))
from world import DESTINATIONS, LAMP_AT, OBJECTS, TASK_TYPES  # noqa: E402

SEED = 20251203
N_TRAIN, N_PUBLIC, N_PRIVATE = 4000, 150, 150
HELD_OUT = 0.22
TRAIN_SEEDS, PUBLIC_SEEDS, PRIVATE_SEEDS = 0, 1_000_000, 2_000_000


def combos():
    out = []
    for task_type in TASK_TYPES:
        destinations = [LAMP_AT] if task_type == "look_at_obj_in_light" else DESTINATIONS
        out += [(task_type, obj, dest) for obj in OBJECTS[task_type] for dest in destinations]
    return out


def split_combos(rng):
    """Per task type, a random 22% of its combinations for evaluation, the rest for training."""
    train, held = [], []
    for task_type in TASK_TYPES:
        mine = [c for c in combos() if c[0] == task_type]
        rng.shuffle(mine)
        k = max(1, round(HELD_OUT * len(mine)))
        held += mine[:k]
        train += mine[k:]
    return train, held


def games(rng, pool, n, first_seed):
    by_type = {t: [c for c in pool if c[0] == t] for t in TASK_TYPES}
    out = []
    for i in range(n):
        task_type, obj, dest = rng.choice(by_type[TASK_TYPES[i % len(TASK_TYPES)]])
        out.append({"seed": first_seed + i, "task_type": task_type, "object": obj, "destination": dest})
    return out


def generate():
    rng = random.Random(SEED)
    train_pool, held_pool = split_combos(rng)
    print(f"{len(train_pool)} training and {len(held_pool)} held-out goal combinations")
    return (
        games(rng, train_pool, N_TRAIN, TRAIN_SEEDS),
        games(rng, held_pool, N_PUBLIC, PUBLIC_SEEDS),
        games(rng, held_pool, N_PRIVATE, PRIVATE_SEEDS),
    )


if __name__ == "__main__":
    splits.main(__doc__, HERE, generate, noun="games", sort_keys=False)
