"""Make the shipped base model, model/, by briefly training from scratch.

    PYTHONPATH=<dir holding microlm and micro_gsm8k> python3 pretrain.py [--steps N] [--out DIR]

The model reads whole training items (prompt and answer, loss on every token,
like pretraining on raw text) whose worked lines copy the operands and the sign
but carry a result off by up to SPREAD either way (the true one among them), so
it learns the format and to copy operands, not the arithmetic: its sampled
answers are right about one time in 2 * SPREAD + 1, and a reward-only learner
finds rewarded samples that are right for the right reason (see README.md,
"Calibration").
Seeded and single-threaded, so a rerun on the same machine gives the same
weights bit for bit; another CPU or BLAS build may round differently and end
with slightly different weights. The committed model/ is the reference.
"""

import os
import random
import re

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import GPTConfig, data, pretraining, train  # noqa: E402  (after the thread settings above)
from micro_gsm8k import format_completion, format_prompt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = GPTConfig(context_len=128, n_layer=2, n_head=4, d_model=96)
SPREAD = 6


def noisy(answer, rng):
    """The worked answer with its result moved by a uniform offset in [-SPREAD, SPREAD] (never below 0)."""
    a, op, b, result = re.match(r"(\d+) ([+-]) (\d+) = (\d+)", answer).groups()
    r = max(0, int(result) + rng.randint(-SPREAD, SPREAD))
    return f"{a} {op} {b} = {r}\n#### {r}"


def main():
    args = pretraining.start(pretraining.parser(__doc__, HERE, steps=800, lr=1e-3))
    rng = random.Random(args.seed)
    # Empty prompt: the loss covers the question too, as in plain language-model pretraining.
    pairs = [("", format_prompt(it["question"]) + format_completion(noisy(it["answer"], rng))) for it in data.read_jsonl(args.data)]
    pretraining.train(CONFIG, args, train.warmup_constant(args.lr, warmup=50), pairs=pairs)


if __name__ == "__main__":
    main()
