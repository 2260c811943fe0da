"""Generate the micro-gsm8k data: templated two-operand word problems.

    PYTHONPATH=<dir holding microlm> python3 generate.py [--out-dir DIR]

Writes DIR/data/train.jsonl (agent-visible) and DIR/eval/{public,private,decoys}.jsonl
(hidden; decoys only for the contamination check), DIR defaulting to this task's folder. Items look like GSM8K:
{"question": "...", "answer": "14 + 7 = 21\\n#### 21"}. The output is a pure
function of SEED, so running it again gives byte-identical files. No question
appears twice anywhere, so train and eval share none.
"""

import os
import random

from microlm import splits

HERE = os.path.dirname(os.path.abspath(__file__))

SEED = 20240617
N_TRAIN, N_PUBLIC, N_PRIVATE = 4000, 200, 200
# Operand ranges, inclusive. A one- or two-digit number and a digit keep the arithmetic
# (carries and borrows included) learnable by the tiny model within a couple of minutes.
FIRST, SECOND = (2, 19), (2, 9)

NAMES = ["Ann", "Ben", "Cara", "Dan", "Eva", "Finn", "Gia", "Hugo", "Ivy", "Jack", "Kim", "Leo", "Mia", "Noah", "Omar", "Pia"]
OBJECTS = ["apples", "books", "coins", "pens", "cards", "shells", "stickers", "marbles", "eggs", "stamps", "cookies", "toys"]
PLACES = ["box", "bag", "jar", "basket"]

ADD = [
    "{name} has {a} {obj}. {name} buys {b} more. How many {obj} does {name} have now?",
    "{name} had {a} {obj} and found {b} more. How many {obj} does {name} have?",
    "There are {a} {obj} in a {place}. {name} puts in {b} more. How many {obj} are in the {place}?",
    "{name} read {a} pages on Monday and {b} pages on Tuesday. How many pages did {name} read?",
]
SUB = [
    "{name} has {a} {obj}. {name} gives {b} to a friend. How many {obj} are left?",
    "{name} had {a} {obj} and lost {b} of them. How many {obj} does {name} have now?",
    "There are {a} {obj} in a {place}. {name} takes out {b}. How many {obj} remain?",
    "{name} needs {a} {obj} and already has {b}. How many more {obj} does {name} need?",
]


def make_item(rng):
    a, b = rng.randint(*FIRST), rng.randint(*SECOND)
    subtract = rng.random() < 0.5
    if subtract:
        a, b = max(a, b), min(a, b)  # results stay non-negative
    template = rng.choice(SUB if subtract else ADD)
    question = template.format(name=rng.choice(NAMES), obj=rng.choice(OBJECTS), place=rng.choice(PLACES), a=a, b=b)
    result = a - b if subtract else a + b
    return {"question": question, "answer": f"{a} {'-' if subtract else '+'} {b} = {result}\n#### {result}"}


def generate():
    """Return (train, public, private, decoys) lists of items, all questions distinct.

    Decoys (eval/decoys.jsonl, hidden, never graded): as many more draws as the evaluation items, taken after
    everything else so the other files stay as they were; the contamination check compares how many of each an
    agent's files hold.
    """
    rng = random.Random(SEED)
    seen, items = set(), []
    while len(items) < N_TRAIN + 2 * (N_PUBLIC + N_PRIVATE):
        item = make_item(rng)
        if item["question"] not in seen:
            seen.add(item["question"])
            items.append(item)
    n_eval = N_TRAIN + N_PUBLIC + N_PRIVATE
    return items[:N_TRAIN], items[N_TRAIN : N_TRAIN + N_PUBLIC], items[N_TRAIN + N_PUBLIC : n_eval], items[n_eval:]


if __name__ == "__main__":
    splits.main(__doc__, HERE, generate)
