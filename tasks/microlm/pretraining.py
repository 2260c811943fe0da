"""The skeleton every task's pretrain.py shares: its command line, the seeding, the training from scratch, the save.

    import os
    os.environ["OMP_NUM_THREADS"] = "1"       # before torch loads (microlm imports it): one thread in every
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # pool, so that a rerun gives the same weights bit for bit

    from microlm import GPTConfig, data, pretraining, train

    HERE = os.path.dirname(os.path.abspath(__file__))
    CONFIG = GPTConfig(context_len=128, n_layer=2, n_head=4, d_model=96)

    def main():
        args = pretraining.start(pretraining.parser(__doc__, HERE, steps=400, lr=1e-3))
        pairs = [("", format_prompt(it) + format_completion(it)) for it in data.read_jsonl(args.data)]
        pretraining.train(CONFIG, args, train.warmup_constant(args.lr, warmup=50), pairs=pairs)

The parser has --data (default TASK/data/train.jsonl), --out (default TASK/model), --steps, --lr,
--batch-size and --seed; add the task's own options to it before `start`. `start` parses, runs
torch on one thread and seeds it; `train` builds a fresh GPT (the seeded initialisation), fits it
with microlm.train.fit and saves it with microlm.checkpoint.save.
"""

import argparse
import os

import torch

from . import checkpoint, data
from .model import GPT
from .train import fit


def parser(description, task_dir, steps, lr, batch_size=32, data_file=True):
    """An argument parser with the options every pretrain.py takes (data_file=False: no --data)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    if data_file:
        p.add_argument("--data", default=os.path.join(task_dir, "data", "train.jsonl"))
    p.add_argument("--out", default=os.path.join(task_dir, "model"))
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--seed", type=int, default=0)
    return p


def start(parser, argv=None):
    """Parses the command line, then runs torch on one thread and seeds it with --seed; returns the arguments."""
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    return args


def train(config, args, lr_at, pairs=None, batches=None, log_every=50, loss_fn=None):
    """Trains a fresh GPT(config) for args.steps steps and saves it to args.out; returns the model.

    The batches are data.batches(pairs, args.batch_size, ...) seeded with args.seed unless given;
    loss_fn goes to microlm.train.fit (for batches that are not (x, y))."""
    model = GPT(config)
    if batches is None:
        batches = data.batches(pairs, args.batch_size, config.context_len, seed=args.seed)
    fit(model, batches, args.steps, lr_at, log_every=log_every, loss_fn=loss_fn)
    checkpoint.save(model, args.out)
    print(f"saved {model.num_params()} parameters to {args.out}", flush=True)
    return model
