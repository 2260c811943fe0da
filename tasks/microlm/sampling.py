"""What every task's rollout sampler shares: its command line, its checks, the choice of prompts and the sampling.

    from microlm import sampling
    parser = sampling.parser("python3 -m micro_x.rollouts", __doc__, data_help="JSONL of ...", max_new_tokens=32)
    args = parser.parse_args(argv)
    model, items, indices = sampling.prepare(args, valid_item, "every --data line must be ...")
    prompts = [format_prompt(items[i]) for i in indices for _ in range(args.group_size)]
    completions = sampling.sample(model, prompts, args)

prepare picks n / group-size distinct items at random (seeded by --seed), so the same seed
gives the same rollouts. A bad argument, checkpoint or data file prints "error: ..." on
stderr and exits with status 2. Progress goes to stderr.
"""

import argparse
import json
import os
import random
import sys
import time

import torch

from .checkpoint import CheckpointError, load
from .decode import generate


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def parser(prog, description, data_help, max_new_tokens):
    """An argument parser with the options every sampler takes; add the task's own before parsing."""
    p = argparse.ArgumentParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (config.json + model.pt)")
    p.add_argument("--data", required=True, help=data_help)
    p.add_argument("--n", type=int, required=True, help="total number of completions")
    p.add_argument("--group-size", type=int, default=1, help="completions per prompt; must divide n")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=max_new_tokens, help=f"the grader's limit is {max_new_tokens}")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: %(default)s; None: torch's own choice)")
    p.add_argument("--out", required=True, help="output JSONL path")
    return p


def prepare(args, valid_item, item_rule, positive=()):
    """Checks the arguments, loads the checkpoint and the data; returns (model, items, indices).

    valid_item(item) says whether a --data line is usable, item_rule is the message when one
    is not, and positive lists the task's own (option name, value) pairs that must be >= 1."""
    if args.n < 1 or args.group_size < 1 or args.n % args.group_size:
        fail(f"--n ({args.n}) must be a positive multiple of --group-size ({args.group_size})")
    counts = [("--max-new-tokens", args.max_new_tokens), ("--batch-size", args.batch_size), *positive, ("--top-k", args.top_k or 1)]
    if args.temperature < 0 or any(value < 1 for _, value in counts):
        names = [name for name, _ in counts]
        fail(f"--temperature must be >= 0; {', '.join(names[:-1])} and {names[-1]} must be >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    # Idle pool threads spin and are charged as compute: say what this job runs with.
    pools = ", ".join(f"{name} {os.environ.get(name, 'unset')}" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    print(f"rollouts: torch threads {torch.get_num_threads()}; {pools}", file=sys.stderr, flush=True)
    try:
        model = load(args.checkpoint)
    except CheckpointError as e:
        fail(f"invalid checkpoint: {e}")
    if args.max_new_tokens > model.config.context_len - 2:
        fail(f"--max-new-tokens must be at most the model's context_len - 2 ({model.config.context_len - 2})")
    try:
        with open(args.data) as f:
            items = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read --data: {e}")
    if not all(valid_item(it) for it in items):
        fail(item_rule)
    n_prompts = args.n // args.group_size
    if n_prompts > len(items):
        fail(f"--n / --group-size = {n_prompts} prompts, but --data has only {len(items)} items")
    return model, items, random.Random(args.seed).sample(range(len(items)), n_prompts)


def sample(model, prompts, args):
    """One completion per prompt, sampled with the arguments' temperature, top-k, seed and limits."""
    print(f"rollouts: sampling {len(prompts)} completions", file=sys.stderr, flush=True)
    start = time.time()
    completions = generate(
        model, prompts, args.max_new_tokens,
        temperature=args.temperature, top_k=args.top_k, seed=args.seed, batch_size=args.batch_size,
    )
    print(f"rollouts: sampled in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    return completions
