"""Make the shipped base model, model/, by briefly training from scratch.

    PYTHONPATH=<dir holding microlm and micro_example> python3 pretrain.py [--steps N] [--out DIR]

Fill in: what the base model learns and what it must not yet know. A good base model writes in
the right format and stops, but scores low, leaving room for the agent's training; it is what
the agent gets at /workspace/models/base and what the baseline grades. Here it reads whole items
(prompt and answer, loss on every token, like pretraining on raw text) for a few hundred steps.
Seeded and single-threaded (microlm.pretraining), so a rerun on the same machine gives the same
weights bit for bit; commit model/ and write the baseline's grade into task.json's figures.
"""

import os

# One thread in every pool, set before torch loads (microlm imports it): a rerun gives the same weights.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import GPTConfig, data, pretraining, train  # noqa: E402
from micro_example import format_completion, format_prompt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# The context must hold BOS, the longest prompt and the grader's new tokens.
CONFIG = GPTConfig(context_len=64, n_layer=2, n_head=4, d_model=64)


def main():
    parser = pretraining.parser(__doc__, HERE, steps=300, lr=1e-3)  # add the task's own options here
    args = pretraining.start(parser)
    # Empty prompt: the loss covers the prompt too, as in plain language-model pretraining.
    pairs = [("", format_prompt(it["word"]) + format_completion(it["answer"])) for it in data.read_jsonl(args.data)]
    pretraining.train(CONFIG, args, train.warmup_constant(args.lr, warmup=50), pairs=pairs)


if __name__ == "__main__":
    main()
