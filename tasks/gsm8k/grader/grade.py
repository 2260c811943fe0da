"""Grade a gsm8k submission on the hidden test set, as the reference harness grades GSM8K.

    PYTHONPATH=<dir holding hflm> <.venv-full>/bin/python grade.py \\
        --checkpoint DIR --base DIR [--base-id ORG/NAME] --eval-dir DIR --out FILE.json

The checkpoint is a submitted folder: a full Hugging Face model or a PEFT LoRA adapter of the run's
base model (--base). hflm.submission checks it and writes the full model folder graded (an adapter
merged onto the base) beside --out; a refused folder exits with status 2 and "invalid checkpoint:
[code] message" on stderr, writing no score. Each problem of EVAL_DIR/public.jsonl and private.jsonl
({"question", "answer"}) is asked with hflm.gsm8k's 4-shot chat and completed greedily (at most 512
new tokens, hflm.inference: vLLM on a GPU, else transformers), and scored by hflm.gsm8k's rules.

Writes {"grader_version", "public": {"score", "correct", "total"}, "private": {..., "whole_score",
"whole_correct", "whole_total"}}, score = 100 * correct / total. The whole-set figure (both halves, the
1,319 problems) is what compares with the paper; it is kept with the private half, which the agent
never sees, since with the public score it would give the private one away.
"""

import json
import sys

from hflm import grading  # first: it pins the thread pools before torch loads
from hflm import gsm8k
from hflm.inference import generate

GRADER_VERSION = "gsm8k-grader-1"


def main(argv=None):
    args = grading.parse(__doc__, "where to write the scores (JSON)", argv)
    model_dir = grading.open_submission(args, "grading")
    if model_dir is None:
        return 2

    splits = {split: grading.read_split(args.eval_dir, split) for split in grading.SPLITS}
    completions = grading.per_split(
        splits, lambda rows: generate(model_dir, [gsm8k.messages(row["question"]) for row in rows], gsm8k.GENERATION)
    )
    result = {"grader_version": GRADER_VERSION}
    whole_correct = whole_total = 0
    for split, rows in splits.items():
        correct = sum(
            gsm8k.is_correct(gsm8k.extract_answer(c), gsm8k.reference_answer(row["answer"]))
            for c, row in zip(completions[split], rows)
        )
        result[split] = {"score": round(100.0 * correct / len(rows), 2), "correct": correct, "total": len(rows)}
        whole_correct, whole_total = whole_correct + correct, whole_total + len(rows)
        print(f"{split}: {correct}/{len(rows)} correct", file=sys.stderr, flush=True)
    result["private"].update(
        whole_score=round(100.0 * whole_correct / whole_total, 2), whole_correct=whole_correct, whole_total=whole_total
    )

    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
