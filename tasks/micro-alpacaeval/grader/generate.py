"""Phase 1 of grading micro-alpacaeval: the checkpoint's responses to the hidden instructions.

    PYTHONPATH=<dir holding microlm and micro_alpacaeval> python3 generate.py \\
        --checkpoint DIR --eval-dir DIR --out FILE.jsonl

Reads EVAL_DIR/public.jsonl and EVAL_DIR/private.jsonl and answers every
instruction greedily (at most MAX_NEW_TOKENS new tokens). Writes one line per
item, public items first:
    {"id", "split": "public" | "private", "instruction", "constraints", "reference", "response"}
The server then pairs each response with its reference, has a judge compare them
(grader/judge.py, or an LLM) and computes the win rates. Deterministic: greedy
decoding, fixed batch size, one thread. A checkpoint that fails validation, or
whose context cannot hold the response, exits with status 2 and the reason on
stderr, writing nothing.
"""

import json
import os
import sys
import time

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import CheckpointError, checkpoint, generate, grading  # noqa: E402  (after the thread settings above)
from micro_alpacaeval import format_prompt  # noqa: E402

GENERATOR_VERSION = "micro-alpacaeval-generate-1"
SPLITS = grading.SPLITS
MAX_NEW_TOKENS = 128  # the references are at most 120 characters
BATCH_SIZE = 100
# BOS + the longest prompt (124 characters) + the response: a context of 256 holds them all.
MIN_CONTEXT = MAX_NEW_TOKENS + 2


def load_model(path):
    """The checkpoint as a GPT; raises CheckpointError when it cannot be graded."""
    model = checkpoint.load(path)
    if model.config.context_len < MIN_CONTEXT:
        raise CheckpointError(
            f"context_len {model.config.context_len} cannot hold a prompt and {MAX_NEW_TOKENS} new tokens; "
            f"use at least {MIN_CONTEXT} (256 fits every prompt whole)"
        )
    return model


def respond(model, items):
    """Greedy responses to the items' instructions, in order."""
    prompts = [format_prompt(it["instruction"]) for it in items]
    return generate(model, prompts, MAX_NEW_TOKENS, batch_size=BATCH_SIZE)


def response_rows(model, eval_dir):
    """The output lines: every item of both splits with its greedy response, public first."""
    rows = []
    for split in SPLITS:
        items = grading.load_split(eval_dir, split)
        start = time.time()
        for item, response in zip(items, respond(model, items)):
            rows.append({
                "id": item["id"], "split": split, "instruction": item["instruction"],
                "constraints": item["constraints"], "reference": item["reference"], "response": response,
            })
        print(f"{split}: {len(items)} responses in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    return rows


def main():
    args = grading.parse(__doc__, "where to write the responses (JSONL)")
    rows = response_rows(grading.load_or_exit(args.checkpoint, load_model), args.eval_dir)
    with open(args.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
