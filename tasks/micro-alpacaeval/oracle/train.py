"""Oracle solution for micro-alpacaeval: supervised fine-tuning on the references that obey every constraint.

Run in the sandbox as `cd /workspace && python3 code/train.py` (PYTHONPATH=/workspace/lib).
About a third of the training references break one of their constraints, and the
judge prefers whichever response obeys more of them, so imitating every reference
would also imitate its mistakes. The constraint checkers are public
(micro_alpacaeval.constraints): keep only the references that pass all their
checks, fine-tune on prompt -> reference with the loss on the reference, measure
on a slice of the training data held out from fine-tuning how often greedy
responses obey all their constraints, and save to /workspace/output/final/.
"""

import argparse
import json
import os
import random

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): a model
# this small gains nothing from more, and idle threads spinning would be charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after the thread settings above)

from microlm import checkpoint, data, generate  # noqa: E402
from microlm.train import fit, warmup_cosine  # noqa: E402
from micro_alpacaeval import constraints, format_completion, format_prompt  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="/workspace/models/base")
    parser.add_argument("--data", default="/workspace/data/train.jsonl")
    parser.add_argument("--out", default="/workspace/output/final")
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--holdout", type=int, default=100, help="training items kept aside to measure obedience")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def obeyed(model, items):
    """Percentage of items whose greedy response satisfies all its constraints (128 new tokens, as graded)."""
    responses = generate(model, [format_prompt(it["instruction"]) for it in items], max_new_tokens=128)
    return 100.0 * sum(not constraints.failed(it["constraints"], r) for it, r in zip(items, responses)) / len(items)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    with open(args.data) as f:
        items = [json.loads(line) for line in f]
    random.Random(args.seed).shuffle(items)
    held_out, train = items[: args.holdout], items[args.holdout :]
    clean = [it for it in train if not constraints.failed(it["constraints"], it["reference"])]
    print(f"{len(clean)} of {len(train)} training references obey all their constraints", flush=True)
    pairs = [(format_prompt(it["instruction"]), format_completion(it["reference"])) for it in clean]

    model = checkpoint.load(args.base)
    print(f"base model: {model.num_params()} parameters, held-out all-obeyed {obeyed(model, held_out):.1f}%", flush=True)
    batches = data.batches(pairs, args.batch_size, model.config.context_len, seed=args.seed)
    # Linear warmup, then cosine decay to a tenth of the peak rate.
    fit(model, batches, args.steps, warmup_cosine(args.lr, args.warmup, args.steps))

    print(f"held-out all-obeyed {obeyed(model, held_out):.1f}%", flush=True)
    checkpoint.save(model, args.out)
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
