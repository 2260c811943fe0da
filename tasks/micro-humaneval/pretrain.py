"""Make the shipped base model, model/, by briefly training from scratch.

    PYTHONPATH=<dir holding microlm and micro_humaneval> python3 pretrain.py [--steps N] [--out DIR]

The model reads whole training items (signature, docstring and body, loss on
every token, like pretraining on raw code) at a modest learning rate for 1,100
steps: enough to write an indented `return ...` line with names from the prompt
and stop, and to get about a quarter of the training problems right greedily (a
tenth when sampled at temperature 1), often missing the constant. Fewer steps
leave sampled successes too rare for a reward-only learner to generalise from
(README: Model); more push the held-out baseline past 20.
Seeded and single-threaded, so a rerun on the same machine gives the same
weights bit for bit; another CPU or BLAS build may round differently and end
with slightly different weights. The committed model/ is the reference.
"""

import os

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import GPTConfig, data, pretraining, train  # noqa: E402  (after the thread settings above)
from micro_humaneval import format_completion, format_prompt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# Context 192: the longest prompt (under 100 characters) plus the grader's 64 new tokens fit.
CONFIG = GPTConfig(context_len=192, n_layer=2, n_head=4, d_model=96)


def main():
    args = pretraining.start(pretraining.parser(__doc__, HERE, steps=1100, lr=1e-3))
    # Empty prompt: the loss covers the signature and docstring too, as in plain pretraining.
    pairs = [("", format_prompt(it) + format_completion(it)) for it in data.read_jsonl(args.data)]
    pretraining.train(CONFIG, args, train.warmup_constant(args.lr, warmup=50), pairs=pairs)


if __name__ == "__main__":
    main()
