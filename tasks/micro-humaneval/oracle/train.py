"""Oracle solution for micro-humaneval: supervised fine-tuning on the canonical solutions.

Run in the sandbox as `cd /workspace && python3 code/train.py` (PYTHONPATH=/workspace/lib).
It fine-tunes the base model on prompt -> canonical body, with the loss on the
body (and its EOS) only and a higher learning rate than the base model was
trained with, checks pass@1 on a slice of the training data held out from
fine-tuning (running the tests as the grader does), and saves the result to
/workspace/output/final/.
"""

import argparse
import json
import random

import torch

from microlm import checkpoint, data, generate
from microlm.train import fit, warmup_cosine
from micro_humaneval import build_program, format_completion, format_prompt
from micro_humaneval.execute import compare, run_programs


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="/workspace/models/base")
    parser.add_argument("--data", default="/workspace/data/train.jsonl")
    parser.add_argument("--out", default="/workspace/output/final")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--holdout", type=int, default=200, help="training items kept aside to measure pass@1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads; a model this small gains little from more")
    return parser.parse_args()


def pass_at_1(model, items):
    """Percentage of items whose greedy program passes every test (the grader's rule)."""
    prompts = [format_prompt(it) for it in items]
    completions = generate(model, prompts, max_new_tokens=64)
    jobs = [
        {"program": build_program(p, c), "entry_point": it["entry_point"], "calls": [t["args"] for t in it["tests"]]}
        for p, c, it in zip(prompts, completions, items)
    ]
    outputs = run_programs(jobs)
    solved = sum(compare(o, [t["expected"] for t in it["tests"]]) == len(it["tests"]) for o, it in zip(outputs, items))
    return 100.0 * solved / len(items)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.data) as f:
        items = [json.loads(line) for line in f]
    random.Random(args.seed).shuffle(items)
    held_out, train = items[: args.holdout], items[args.holdout :]
    pairs = [(format_prompt(it), format_completion(it)) for it in train]

    model = checkpoint.load(args.base)
    print(f"base model: {model.num_params()} parameters, held-out pass@1 {pass_at_1(model, held_out):.1f}%", flush=True)
    batches = data.batches(pairs, args.batch_size, model.config.context_len, seed=args.seed)
    # Linear warmup, then cosine decay to a tenth of the peak rate.
    fit(model, batches, args.steps, warmup_cosine(args.lr, args.warmup, args.steps))

    print(f"held-out pass@1 {pass_at_1(model, held_out):.1f}%", flush=True)
    checkpoint.save(model, args.out)
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
