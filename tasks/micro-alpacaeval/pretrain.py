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

import argparse
import os
import random

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after the thread settings above)

from generate import pretraining_example  # noqa: E402  (this task's generate.py)
from microlm import GPT, GPTConfig, checkpoint, data, train  # noqa: E402
from micro_alpacaeval import format_completion, format_prompt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = GPTConfig(context_len=256, n_layer=2, n_head=4, d_model=96)
N_EXAMPLES = 4000
FOLLOW = 0.25  # chance that a pretraining answer obeys each constraint of its instruction


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(HERE, "model"))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--d-model", type=int, default=CONFIG.d_model)
    parser.add_argument("--n-layer", type=int, default=CONFIG.n_layer)
    parser.add_argument("--follow", type=float, default=FOLLOW, help="chance that an answer obeys each constraint")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    # Empty prompt: the loss covers the instruction too, as in plain language-model pretraining.
    pairs = []
    for _ in range(N_EXAMPLES):
        instruction, answer = pretraining_example(rng, args.follow)
        pairs.append(("", format_prompt(instruction) + format_completion(answer)))
    config = GPTConfig(context_len=CONFIG.context_len, n_layer=args.n_layer, n_head=CONFIG.n_head, d_model=args.d_model)
    model = GPT(config)
    batches = data.batches(pairs, args.batch_size, config.context_len, seed=args.seed)
    train.fit(model, batches, args.steps, train.warmup_constant(args.lr, warmup=50))
    checkpoint.save(model, args.out)
    print(f"saved {model.num_params()} parameters to {args.out}")


if __name__ == "__main__":
    main()
