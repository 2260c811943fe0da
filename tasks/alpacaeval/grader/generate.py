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

import json
import os
import sys

from hflm import grading  # first: it pins the thread pools before torch loads
from hflm import alpacaeval

FIELDS = ("instruction", "output", "instruction_difficulty")


def read_split(eval_dir, split):
    path = os.path.join(eval_dir, f"{split}.jsonl")
    rows = grading.read_split(eval_dir, split)
    for i, row in enumerate(rows):
        missing = [k for k in FIELDS if k not in row]
        if missing:
            # Assets of an older builder: the length-controlled win rate could not be computed from them.
            sys.exit(f"{path}: row {i} lacks {', '.join(missing)}; prepare the assets again (a2rl prepare alpacaeval)")
    return rows


def main(argv=None):
    args = grading.parse(__doc__, "where to write the responses (JSONL)", argv)
    splits = {split: read_split(args.eval_dir, split) for split in grading.SPLITS}
    model_dir = grading.open_submission(args, "answering with")
    if model_dir is None:
        return 2

    responses = grading.per_split(splits, lambda rows: alpacaeval.respond(model_dir, [row["instruction"] for row in rows]))
    lines = [
        {"id": f"{split}-{i}", "split": split, "instruction": row["instruction"], "constraints": None,
         "reference": row["output"], "response": response, "instruction_difficulty": row["instruction_difficulty"]}
        for split, rows in splits.items()
        for i, (row, response) in enumerate(zip(rows, responses[split]))
    ]

    with open(args.out, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
