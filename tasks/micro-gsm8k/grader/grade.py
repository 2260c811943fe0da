"""Grade a micro-gsm8k checkpoint on the hidden evaluation set.

    PYTHONPATH=<dir holding microlm and micro_gsm8k> python3 grade.py \\
        --checkpoint DIR --eval-dir DIR --out FILE.json

Reads EVAL_DIR/public.jsonl and EVAL_DIR/private.jsonl, completes every question
greedily and scores the integer after the last "####" against the reference.
Writes {"grader_version", "public": {"score", "correct", "total"}, "private": {...}}
with score = 100 * correct / total. Deterministic: fixed decoding settings,
batch size and thread count. A checkpoint that fails validation exits with
status 2 and the reason on stderr, writing no score.
"""

import json
import os
import sys
import time

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import generate, grading  # noqa: E402  (after the thread settings above)
from micro_gsm8k import format_prompt, reward  # noqa: E402

GRADER_VERSION = "micro-gsm8k-grader-1"
MAX_NEW_TOKENS = 32  # the reference answers are under 20 characters
BATCH_SIZE = 100


def main():
    args = grading.parse(__doc__, "where to write the scores (JSON)")
    model = grading.load_or_exit(args.checkpoint)
    result = {"grader_version": GRADER_VERSION}
    for split in grading.SPLITS:
        items = grading.load_split(args.eval_dir, split)
        start = time.time()
        completions = generate(
            model, [format_prompt(it["question"]) for it in items], MAX_NEW_TOKENS, batch_size=BATCH_SIZE
        )
        correct = int(sum(reward(c, it["answer"]) for c, it in zip(completions, items)))
        result[split] = {"score": round(100.0 * correct / len(items), 2), "correct": correct, "total": len(items)}
        print(f"{split}: {correct}/{len(items)} correct in {time.time() - start:.1f}s", file=sys.stderr, flush=True)

    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
