"""Make the shipped base model, model/, by briefly training from scratch.

    PYTHONPATH=<dir holding microlm and micro_alpacaeval> python3 pretrain.py [--steps N] [--out DIR]

The model reads training-like instructions with weak answers
(generate.pretraining_example), loss on every token, like pretraining on raw
text: it learns the prompt format, the subjects' sentences and how to stop, but
each answer obeys each constraint only with probability FOLLOW and otherwise
writes as if it were not asked, so the model mostly answers "Use exactly 3
bullet points." with plain prose. Seeded and single-threaded, so a rerun on the
same machine gives the same weights bit for bit; another CPU or BLAS build may
round differently and end with slightly different weights. The committed model/ is the reference.
"""

import os
import random

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from generate import pretraining_example  # noqa: E402  (this task's generate.py)
from microlm import GPTConfig, pretraining, train  # noqa: E402  (after the thread settings above)
from micro_alpacaeval import format_completion, format_prompt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = GPTConfig(context_len=256, n_layer=2, n_head=4, d_model=96)
N_EXAMPLES = 4000
FOLLOW = 0.4  # chance that a pretraining answer obeys each constraint of its instruction


def main():
    parser = pretraining.parser(__doc__, HERE, steps=1500, lr=2e-3, batch_size=16, data_file=False)
    parser.add_argument("--d-model", type=int, default=CONFIG.d_model)
    parser.add_argument("--n-layer", type=int, default=CONFIG.n_layer)
    parser.add_argument("--follow", type=float, default=FOLLOW, help="chance that an answer obeys each constraint")
    args = pretraining.start(parser)
    rng = random.Random(args.seed)
    # Empty prompt: the loss covers the instruction too, as in plain language-model pretraining.
    pairs = []
    for _ in range(N_EXAMPLES):
        instruction, answer = pretraining_example(rng, args.follow)
        pairs.append(("", format_prompt(instruction) + format_completion(answer)))
    config = GPTConfig(context_len=CONFIG.context_len, n_layer=args.n_layer, n_head=CONFIG.n_head, d_model=args.d_model)
    pretraining.train(config, args, train.warmup_constant(args.lr, warmup=50), pairs=pairs)


if __name__ == "__main__":
    main()
