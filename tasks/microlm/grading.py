"""What every grader entry shares: its command line, the checkpoint it grades, the held-out splits it reads.

    args = grading.parse(__doc__, "where to write the scores (JSON)")   # --checkpoint, --eval-dir, --out
    model = grading.load_or_exit(args.checkpoint)                      # exits 2 on a bad checkpoint
    for split in grading.SPLITS:
        items = grading.load_split(args.eval_dir, split)              # EVAL_DIR/<split>.jsonl
        ...

The server runs a grader entry as `python3 grader/<entry> --checkpoint DIR --eval-dir DIR --out FILE`
in a sandbox (src/grading.ts). A grader must be deterministic: set OMP_NUM_THREADS=1 and
OPENBLAS_NUM_THREADS=1 before torch loads (before importing microlm); `parse` runs torch on one
thread. A checkpoint that cannot be graded exits with status 2 and "invalid checkpoint: <why>" on
stderr, writing nothing.
"""

import argparse
import os
import sys

import torch

from .checkpoint import CheckpointError, load
from .data import read_jsonl

SPLITS = ("public", "private")


def parse(description, out_help, argv=None):
    """Parses --checkpoint, --eval-dir and --out, and runs torch on one thread; returns the arguments."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (config.json + model.pt)")
    parser.add_argument("--eval-dir", required=True, help="directory with public.jsonl and private.jsonl")
    parser.add_argument("--out", required=True, help=out_help)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    return args


def load_or_exit(directory, loader=load):
    """The checkpoint as a GPT (loader(directory)); a CheckpointError exits with status 2 and the reason on stderr."""
    try:
        return loader(directory)
    except CheckpointError as e:
        print(f"invalid checkpoint: {e}", file=sys.stderr)
        sys.exit(2)


def load_split(eval_dir, split):
    """The items of EVAL_DIR/<split>.jsonl."""
    return read_jsonl(os.path.join(eval_dir, f"{split}.jsonl"))
