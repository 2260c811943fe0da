"""Make the shipped base model, model/, by briefly training from scratch.

    PYTHONPATH=<dir holding microlm and micro_gsm8k> python3 pretrain.py [--steps N] [--out DIR]

The model reads whole training items (prompt and answer, loss on every token,
like pretraining on raw text) at a modest learning rate for a few hundred
steps: enough to learn the prompt and answer format, not yet the arithmetic.
Seeded and single-threaded, so a rerun on the same machine gives the same
weights bit for bit; another CPU or BLAS build may round differently and end
with slightly different weights. The committed model/ is the reference.
"""

import argparse
import json
import os

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after the thread settings above)

from microlm import GPT, GPTConfig, checkpoint, data, train  # noqa: E402
from micro_gsm8k import format_completion, format_prompt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = GPTConfig(context_len=128, n_layer=2, n_head=4, d_model=96)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(HERE, "data", "train.jsonl"))
    parser.add_argument("--out", default=os.path.join(HERE, "model"))
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    with open(args.data) as f:
        items = [json.loads(line) for line in f]
    # Empty prompt: the loss covers the question too, as in plain language-model pretraining.
    pairs = [("", format_prompt(it["question"]) + format_completion(it["answer"])) for it in items]
    model = GPT(CONFIG)
    batches = data.batches(pairs, args.batch_size, CONFIG.context_len, seed=args.seed)
    train.fit(model, batches, args.steps, train.warmup_constant(args.lr, warmup=50))
    checkpoint.save(model, args.out)
    print(f"saved {model.num_params()} parameters to {args.out}")


if __name__ == "__main__":
    main()
