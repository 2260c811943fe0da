"""Oracle solution for micro-gsm8k: supervised fine-tuning on the training answers.

Run in the sandbox as `cd /workspace && python3 code/train.py` (PYTHONPATH=/workspace/lib).
It fine-tunes the base model on prompt -> worked answer, with the loss on the
answer only and a higher learning rate than the base model was trained with,
checks exact-answer accuracy on a slice of the training data held out from
fine-tuning, and saves the result to /workspace/output/final/.
"""

import argparse
import json
import random

import torch

from microlm import checkpoint, data, generate
from microlm.train import fit, warmup_cosine
from micro_gsm8k import format_completion, format_prompt, reward


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="/workspace/models/base")
    parser.add_argument("--data", default="/workspace/data/train.jsonl")
    parser.add_argument("--out", default="/workspace/output/final")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--holdout", type=int, default=200, help="training items kept aside to measure accuracy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads; a model this small gains little from more")
    return parser.parse_args()


def accuracy(model, items):
    completions = generate(model, [format_prompt(it["question"]) for it in items], max_new_tokens=32)
    return 100.0 * sum(reward(c, it["answer"]) for c, it in zip(completions, items)) / len(items)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.data) as f:
        items = [json.loads(line) for line in f]
    random.Random(args.seed).shuffle(items)
    held_out, train = items[: args.holdout], items[args.holdout :]
    pairs = [(format_prompt(it["question"]), format_completion(it["answer"])) for it in train]

    model = checkpoint.load(args.base)
    print(f"base model: {model.num_params()} parameters, held-out accuracy {accuracy(model, held_out):.1f}%", flush=True)
    batches = data.batches(pairs, args.batch_size, model.config.context_len, seed=args.seed)
    # Linear warmup, then cosine decay to a tenth of the peak rate.
    fit(model, batches, args.steps, warmup_cosine(args.lr, args.warmup, args.steps))

    print(f"held-out accuracy {accuracy(model, held_out):.1f}%", flush=True)
    checkpoint.save(model, args.out)
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
