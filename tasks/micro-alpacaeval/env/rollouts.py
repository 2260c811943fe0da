"""Sample responses to training instructions from a checkpoint, for the server to judge.

    python3 -m micro_alpacaeval.rollouts --checkpoint DIR --data /workspace/data/train.jsonl \\
        --n 64 [--group-size 8] [--temperature 1.0] [--top-k K] [--seed 0] \\
        [--max-new-tokens 128] --out FILE.jsonl

Picks n / group-size distinct training items at random (seeded) and samples
group-size completions for each (the groups GRPO compares). Writes one JSON
line per completion:
    {"prompt_index": i, "instruction": ..., "constraints": [...], "reference": ...,
     "prompt": ..., "completion": ...}
where prompt_index is the item's line number (from 0) in --data, and prints one
JSON summary line on stdout: {"episodes": n, "out": path}. It does not score:
through launch_rollouts the server then has the task's judge compare each
completion with its reference, in both orders, and adds "reward" to each line
(1 win, 0.5 tie, 0 loss, averaged over the two orders). To score yourself, use
micro_alpacaeval.constraints. Progress goes to stderr. The same seed gives the
same rollouts: pass a new --seed for fresh samples. Exit status 2 on a bad
checkpoint or bad arguments.
"""

import argparse
import json
import random
import sys
import time

import torch

from microlm import CheckpointError, checkpoint, generate

from .prompt import format_prompt


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m micro_alpacaeval.rollouts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (config.json + model.pt)")
    parser.add_argument("--data", required=True, help="JSONL of {instruction, constraints, reference} items")
    parser.add_argument("--n", type=int, required=True, help="total number of completions")
    parser.add_argument("--group-size", type=int, default=1, help="completions per prompt; must divide n")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="the grader's limit is 128")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", required=True, help="output JSONL path")
    args = parser.parse_args(argv)

    if args.n < 1 or args.group_size < 1 or args.n % args.group_size:
        fail(f"--n ({args.n}) must be a positive multiple of --group-size ({args.group_size})")
    if args.temperature < 0 or args.max_new_tokens < 1 or args.batch_size < 1 or (args.top_k or 1) < 1:
        fail("--temperature must be >= 0; --max-new-tokens, --batch-size and --top-k must be >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        model = checkpoint.load(args.checkpoint)
    except CheckpointError as e:
        fail(f"invalid checkpoint: {e}")
    if model.config.context_len < args.max_new_tokens + 2:
        fail(f"--max-new-tokens {args.max_new_tokens} leaves no room for the prompt in context_len {model.config.context_len}")
    try:
        with open(args.data) as f:
            items = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read --data: {e}")
    keys = ("instruction", "constraints", "reference")
    if not all(isinstance(it, dict) and all(k in it for k in keys) for it in items):
        fail('every --data line must be a JSON object with "instruction", "constraints" and "reference"')
    n_prompts = args.n // args.group_size
    if n_prompts > len(items):
        fail(f"--n / --group-size = {n_prompts} prompts, but --data has only {len(items)} items")

    indices = random.Random(args.seed).sample(range(len(items)), n_prompts)
    prompts = [format_prompt(items[i]["instruction"]) for i in indices for _ in range(args.group_size)]
    print(f"rollouts: sampling {len(prompts)} completions", file=sys.stderr, flush=True)
    start = time.time()
    completions = generate(
        model, prompts, args.max_new_tokens,
        temperature=args.temperature, top_k=args.top_k, seed=args.seed, batch_size=args.batch_size,
    )
    print(f"rollouts: done in {time.time() - start:.1f}s", file=sys.stderr, flush=True)

    with open(args.out, "w") as f:
        for k, completion in enumerate(completions):
            index = indices[k // args.group_size]
            item = items[index]
            record = {
                "prompt_index": index,
                "instruction": item["instruction"],
                "constraints": item["constraints"],
                "reference": item["reference"],
                "prompt": prompts[k],
                "completion": completion,
            }
            f.write(json.dumps(record) + "\n")
    print(json.dumps({"episodes": len(completions), "out": args.out}))


if __name__ == "__main__":
    main()
