"""The command line and loop of a fine-tuning script: start from a checkpoint, fit it on (prompt, completion) pairs, save.

    from microlm import data, finetune

    parser = finetune.parser(__doc__, steps=600, lr=2e-3, warmup=30)
    parser.add_argument("--holdout", type=int, default=200)       # the script's own options
    args = finetune.start(parser)                                  # parses; torch threads and seed
    held_out, train = finetune.holdout(data.read_jsonl(args.data), args.holdout, args.seed)
    pairs = [(format_prompt(it), format_completion(it)) for it in train]
    finetune.run(args, pairs, lambda model: accuracy(model, held_out), "held-out accuracy")

The parser has the starting checkpoint (--base by default, or the flag you name; default
/workspace/models/base), --data, --out (default /workspace/output/final), --steps and --warmup when
given defaults, --lr, --batch-size, --seed and --threads (default 1: a model this small gains little
from more). `run` loads the start checkpoint, prints measure(model) (a percentage) before and after
training with microlm.train.fit (AdamW, linear warmup then cosine decay to a tenth of --lr) on
data.batches(pairs, ...) seeded with --seed, and saves the model to --out with microlm.checkpoint.save.
"""

import argparse
import random

import torch

from . import checkpoint, data
from .train import fit, warmup_cosine


def parser(description, start="--base", start_help="checkpoint to fine-tune", steps=None, lr=1e-3, warmup=None, batch_size=32):
    """An argument parser with the options every fine-tuning script takes; add the script's own before `start`.

    The start checkpoint's flag is `start` (its value is args.start); --steps and --warmup exist only when given a default."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(start, dest="start", default="/workspace/models/base", help=start_help)
    p.add_argument("--data", default="/workspace/data/train.jsonl")
    p.add_argument("--out", default="/workspace/output/final")
    if steps is not None:
        p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--lr", type=float, default=lr)
    if warmup is not None:
        p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads; a model this small gains little from more")
    return p


def start(parser, argv=None):
    """Parses the command line, sets torch's threads (--threads) and seed (--seed); returns the arguments."""
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return args


def holdout(items, n, seed):
    """(held_out, rest): the first n items and the others after a seeded shuffle."""
    items = list(items)
    random.Random(seed).shuffle(items)
    return items[:n], items[n:]


def run(args, pairs, measure, what, steps=None, warmup=None, log_every=50):
    """Fine-tunes args.start on pairs and saves it to args.out, printing `what` (measure(model), in %) before and after.

    steps and warmup default to args.steps and args.warmup. Returns the model."""
    steps = args.steps if steps is None else steps
    warmup = args.warmup if warmup is None else warmup
    model = checkpoint.load(args.start)
    print(f"start ({args.start}, {model.num_params()} parameters): {what} {measure(model):.1f}%", flush=True)
    batches = data.batches(pairs, args.batch_size, model.config.context_len, seed=args.seed)
    fit(model, batches, steps, warmup_cosine(args.lr, warmup, steps), log_every=log_every)
    print(f"end: {what} {measure(model):.1f}%", flush=True)
    checkpoint.save(model, args.out)
    print(f"saved to {args.out}", flush=True)
    return model
