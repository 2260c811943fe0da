"""Generate the micro-deepsearchqa games: multi-hop questions about the fixed corpus.

    PYTHONPATH=<dir holding microlm> python3 generate.py [--out-dir DIR]

Writes DIR/data/train.jsonl (agent-visible) and DIR/eval/{public,private}.jsonl (hidden), DIR
defaulting to this task's folder. A game is {"seed": int, "type": str, "subject": str}. The corpus
itself is built by the env package at import (micro_deepsearchqa.corpus, fixed seed).

Out of distribution: the people and companies are split once; training questions ask only about
the first three quarters (450 people, 180 companies), evaluation questions only about the rest
(public and private each get half of them). The output is a pure function of SEED.
"""

import os
import random
import sys

from microlm import splits

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 4242
TRAIN_PER_TYPE = {"person": 300, "company": 150}
# Per split. birth_region needs link 1 at both hops, the base model's habit, so it is kept rare in evaluation.
EVAL_PER_TYPE = {"birth_region": 10}
EVAL_DEFAULT = 28


def load_env():
    """The env package, importable from the lib folder or straight from this task's env/."""
    try:
        import micro_deepsearchqa as pkg
    except ImportError:
        import importlib.util

        spec = importlib.util.spec_from_file_location("micro_deepsearchqa", os.path.join(HERE, "env", "__init__.py"))
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["micro_deepsearchqa"] = pkg
        spec.loader.exec_module(pkg)
    return pkg


def generate():
    pkg = load_env()
    corpus = pkg.corpus
    rng = random.Random(SEED)
    pools = {}
    for kind, names in (("person", list(corpus.PEOPLE)), ("company", list(corpus.COMPANIES))):
        rng.shuffle(names)
        cut = len(names) * 3 // 4
        rest = names[cut:]
        half = len(rest) // 2
        pools[kind] = {"train": names[:cut], "public": rest[:half], "private": rest[half:]}
    seeds = rng.sample(range(1, 10**6), 4000)
    by_split = {"train": [], "public": [], "private": []}
    for task_type in pkg.TYPES:
        kind = pkg.QUESTION_TYPES[task_type][1]
        for split in by_split:
            count = TRAIN_PER_TYPE[kind] if split == "train" else EVAL_PER_TYPE.get(task_type, EVAL_DEFAULT)
            for subject in rng.sample(pools[kind][split], count):
                by_split[split].append({"seed": seeds.pop(), "type": task_type, "subject": subject})
    for items in by_split.values():
        rng.shuffle(items)
    return by_split["train"], by_split["public"], by_split["private"]


if __name__ == "__main__":
    splits.main(__doc__, HERE, generate, noun="games")
