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

import argparse
import json
import os
import sys
import time

# One thread in every CPU pool before torch loads: the CPU backend's results then do not depend on the
# machine's core count (on a GPU, vLLM's kernels decide).
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the grading sandbox has no network: never try the hub
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from hflm import gsm8k  # noqa: E402  (after the thread settings above)
from hflm.inference import generate  # noqa: E402
from hflm.submission import SubmissionError, materialise  # noqa: E402

GRADER_VERSION = "gsm8k-grader-1"
SPLITS = ("public", "private")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the submitted folder (full model or LoRA adapter)")
    parser.add_argument("--base", required=True, help="the run's base model folder")
    parser.add_argument("--base-id", help="the base model's hub id, e.g. Qwen/Qwen2.5-1.5B-Instruct")
    parser.add_argument("--eval-dir", required=True, help="directory with public.jsonl and private.jsonl")
    parser.add_argument("--out", required=True, help="where to write the scores (JSON)")
    return parser.parse_args(argv)


def read_split(eval_dir, split):
    with open(os.path.join(eval_dir, f"{split}.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv=None):
    args = parse(argv)
    import torch

    torch.set_num_threads(1)
    model_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "graded-model")
    try:
        inspection = materialise(args.checkpoint, args.base, model_dir, args.base_id)
    except SubmissionError as e:
        print(f"invalid checkpoint: [{e.code}] {e}", file=sys.stderr)
        return 2
    print(f"grading a {inspection.kind} submission ({', '.join(inspection.notes) or 'as submitted'})", file=sys.stderr)

    result = {"grader_version": GRADER_VERSION}
    whole_correct = whole_total = 0
    for split in SPLITS:
        rows = read_split(args.eval_dir, split)
        start = time.time()
        completions = generate(model_dir, [gsm8k.messages(row["question"]) for row in rows], gsm8k.GENERATION)
        correct = sum(
            gsm8k.is_correct(gsm8k.extract_answer(c), gsm8k.reference_answer(row["answer"])) for c, row in zip(completions, rows)
        )
        result[split] = {"score": round(100.0 * correct / len(rows), 2), "correct": correct, "total": len(rows)}
        whole_correct, whole_total = whole_correct + correct, whole_total + len(rows)
        print(f"{split}: {correct}/{len(rows)} correct in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    result["private"].update(
        whole_score=round(100.0 * whole_correct / whole_total, 2), whole_correct=whole_correct, whole_total=whole_total
    )

    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
