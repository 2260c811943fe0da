"""Grading, phase 1: write the programs a micro-humaneval checkpoint produces for the hidden problems.

    PYTHONPATH=<dir holding microlm and micro_humaneval> python3 generate.py \\
        --checkpoint DIR --eval-dir DIR --out FILE.jsonl

Reads EVAL_DIR/public.jsonl and EVAL_DIR/private.jsonl and completes every prompt
greedily (at most MAX_NEW_TOKENS new tokens). Writes one JSON line per problem,
public first, in file order:

    {"id": task_id, "split": "public" | "private",
     "program": prompt + completion cut before its first non-indented line,
     "entry_point": ..., "calls": [[args...], ...], "expected": [value, ...]}

Phase 2 (the server) runs `python3 -m micro_humaneval.execute` on {"program",
"entry_point", "calls"} of each line in a fresh sandbox and compares the outputs
with "expected" itself: a problem is solved when every call's value equals its
expected value; score = 100 * solved / total per split. grader/score.py does both
phases locally.

Deterministic: greedy decoding, fixed batch size, one thread. A checkpoint that
fails validation exits with status 2 and the reason on stderr, writing nothing.
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
from micro_humaneval import build_program, format_prompt  # noqa: E402

SPLITS = grading.SPLITS
MAX_NEW_TOKENS = 64  # the longest reference body is 46 characters
BATCH_SIZE = 100


def programs(model, eval_dir):
    """The phase-1 records of every evaluation problem, public first."""
    records = []
    for split in SPLITS:
        items = grading.load_split(eval_dir, split)
        start = time.time()
        prompts = [format_prompt(it) for it in items]
        completions = generate(model, prompts, MAX_NEW_TOKENS, batch_size=BATCH_SIZE)
        for item, prompt, completion in zip(items, prompts, completions):
            records.append({
                "id": item["task_id"],
                "split": split,
                "program": build_program(prompt, completion),
                "entry_point": item["entry_point"],
                "calls": [t["args"] for t in item["tests"]],
                "expected": [t["expected"] for t in item["tests"]],
            })
        print(f"{split}: {len(items)} programs in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    return records


def load_model(directory):
    """The checkpoint as a GPT; raises CheckpointError when it cannot be graded."""
    model = checkpoint.load(directory)
    if model.config.context_len < MAX_NEW_TOKENS + 2:  # BOS, at least one prompt character, the completion
        raise CheckpointError(f"context_len must be at least {MAX_NEW_TOKENS + 2} "
                              f"to write {MAX_NEW_TOKENS} new tokens, not {model.config.context_len}")
    return model


def load_or_exit(directory):
    return grading.load_or_exit(directory, load_model)


def main():
    args = grading.parse(__doc__, "where to write the programs (JSONL)")
    records = programs(load_or_exit(args.checkpoint), args.eval_dir)
    with open(args.out, "w") as f:
        for record in records:
            f.write(json.dumps(record, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
