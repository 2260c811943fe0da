"""Phase one of grading alpacaeval: the submission's outputs to the hidden AlpacaEval instructions.

    PYTHONPATH=<dir holding hflm> <.venv-full>/bin/python generate.py \\
        --checkpoint DIR --base DIR [--base-id ORG/NAME] --eval-dir DIR --out FILE.jsonl

The checkpoint is a submitted folder: a full Hugging Face model or a PEFT LoRA adapter of the run's
base model (--base). hflm.submission checks it and writes the full model folder graded (an adapter
merged onto the base) beside --out; a refused folder exits with status 2 and "invalid checkpoint:
[code] message" on stderr, writing nothing. Each instruction of EVAL_DIR/public.jsonl and
private.jsonl ({"instruction", "output", "generator", "dataset", "instruction_difficulty"}, as
`a2rl prepare alpacaeval` writes them) is answered as the reference answers it (hflm.alpacaeval: the
chat template, greedy, at most 512 new tokens, stripped). Writes one line per instruction, public first:
    {"id", "split", "instruction", "constraints": null, "reference", "response", "instruction_difficulty"}
the reference being alpaca_eval_gpt4_baseline's output. The server's judge kind then has an LLM compare
each response with its reference and scores each half by AlpacaEval 2.0's length-controlled win rate.
"""

import argparse
import json
import os
import sys
import time

# One thread in every CPU pool before torch loads: the CPU backend's outputs then do not depend on the
# machine's core count (on a GPU, vLLM's kernels decide).
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the grading sandbox has no network: never try the hub
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from hflm import alpacaeval  # noqa: E402  (after the thread settings above)
from hflm.submission import SubmissionError, materialise  # noqa: E402

SPLITS = ("public", "private")
FIELDS = ("instruction", "output", "instruction_difficulty")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the submitted folder (full model or LoRA adapter)")
    parser.add_argument("--base", required=True, help="the run's base model folder")
    parser.add_argument("--base-id", help="the base model's hub id, e.g. Qwen/Qwen2.5-1.5B-Instruct")
    parser.add_argument("--eval-dir", required=True, help="directory with public.jsonl and private.jsonl")
    parser.add_argument("--out", required=True, help="where to write the responses (JSONL)")
    return parser.parse_args(argv)


def read_split(eval_dir, split):
    path = os.path.join(eval_dir, f"{split}.jsonl")
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for i, row in enumerate(rows):
        missing = [k for k in FIELDS if k not in row]
        if missing:
            # Assets of an older builder: the length-controlled win rate could not be computed from them.
            sys.exit(f"{path}: row {i} lacks {', '.join(missing)}; prepare the assets again (a2rl prepare alpacaeval)")
    return rows


def main(argv=None):
    args = parse(argv)
    import torch

    torch.set_num_threads(1)
    splits = {split: read_split(args.eval_dir, split) for split in SPLITS}
    model_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "graded-model")
    try:
        inspection = materialise(args.checkpoint, args.base, model_dir, args.base_id)
    except SubmissionError as e:
        print(f"invalid checkpoint: [{e.code}] {e}", file=sys.stderr)
        return 2
    print(f"answering with a {inspection.kind} submission ({', '.join(inspection.notes) or 'as submitted'})", file=sys.stderr)

    lines = []
    for split, rows in splits.items():
        start = time.time()
        responses = alpacaeval.respond(model_dir, [row["instruction"] for row in rows])
        lines += [
            {"id": f"{split}-{i}", "split": split, "instruction": row["instruction"], "constraints": None,
             "reference": row["output"], "response": response, "instruction_difficulty": row["instruction_difficulty"]}
            for i, (row, response) in enumerate(zip(rows, responses))
        ]
        print(f"{split}: {len(rows)} responses in {time.time() - start:.1f}s", file=sys.stderr, flush=True)

    with open(args.out, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
