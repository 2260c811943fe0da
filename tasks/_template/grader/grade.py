"""Grade a micro-example checkpoint on the held-out words (the template's grader; kind "score").

    PYTHONPATH=<dir holding microlm and micro_example> python3 grade.py --checkpoint DIR --eval-dir DIR --out FILE.json

The server runs the entry named in task.json this way, in a sandbox that sees only the checkpoint,
eval/, grader/, microlm and the env package. Reads EVAL_DIR/public.jsonl and EVAL_DIR/private.jsonl,
completes every prompt greedily and writes {"grader_version", "public": {"score", "correct", "total"},
"private": {...}}, score = 100 * correct / total. It must be deterministic (one thread, greedy, fixed
batch size): tasks/contract_test.py grades the base model twice and compares. A checkpoint that fails
validation exits with status 2 and "invalid checkpoint: ..." on stderr, writing nothing.
"""

import json
import os

# One thread in every pool, set before torch loads (microlm imports it): the same weights, the same score.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import generate, grading  # noqa: E402
from micro_example import MAX_NEW_TOKENS, format_prompt, reward  # noqa: E402

GRADER_VERSION = "micro-example-grader-1"


def main():
    args = grading.parse(__doc__, "where to write the scores (JSON)")
    model = grading.load_or_exit(args.checkpoint)
    result = {"grader_version": GRADER_VERSION}
    for split in grading.SPLITS:
        items = grading.load_split(args.eval_dir, split)
        completions = generate(model, [format_prompt(it["word"]) for it in items], MAX_NEW_TOKENS, batch_size=100)
        correct = int(sum(reward(c, it["answer"]) for c, it in zip(completions, items)))
        result[split] = {"score": round(100.0 * correct / len(items), 2), "correct": correct, "total": len(items)}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
