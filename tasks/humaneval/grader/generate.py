"""Grading, phase 1: write the programs a humaneval submission produces for the hidden problems.

    PYTHONPATH=<dir holding hflm> <.venv-full>/bin/python generate.py \\
        --checkpoint DIR --base DIR [--base-id ORG/NAME] --eval-dir DIR --out FILE.jsonl

The checkpoint is a submitted folder: a full Hugging Face model or a PEFT LoRA adapter of the run's
base model (--base). hflm.submission checks it and writes the full model folder graded (an adapter
merged onto the base) beside --out; a refused folder exits with status 2 and "invalid checkpoint:
[code] message" on stderr, writing nothing. Each problem of EVAL_DIR/public.jsonl and private.jsonl
(openai_humaneval rows: task_id, prompt, canonical_solution, test, entry_point) is asked with
hflm.humaneval's chat message and completed greedily (at most 8,192 new tokens, hflm.inference: vLLM on
a GPU, else transformers); the code is extracted and the program assembled by hflm.humaneval's rules.

Writes one JSON line per problem, public first, in file order, in the execute kind's whole-program form:

    {"id": task_id, "split": "public" | "private",
     "program": prompt + extracted code + "\\n" + test + "\\n" + "check(<entry_point>)"}

Phase 2 (the server) runs each program in a sandbox of its own with the task's execution limits
(task.json: 3 s, as the reference); a problem passes when its program runs to its end without raising;
score = 100 * passed / problems per split. hflm.humaneval.run_program does the same locally, unsandboxed.
"""

import json
import sys

from hflm import grading  # first: it pins the thread pools before torch loads
from hflm import humaneval
from hflm.inference import generate

def programs(model_dir, eval_dir):
    """The phase-1 records of every evaluation problem, public first."""
    splits = {split: grading.read_split(eval_dir, split) for split in grading.SPLITS}
    completions = grading.per_split(
        splits, lambda problems: generate(model_dir, [humaneval.messages(p) for p in problems], humaneval.GENERATION)
    )
    return [
        {"id": problem["task_id"], "split": split, "program": humaneval.build_program(problem, humaneval.extract_code(completion))}
        for split, problems in splits.items()
        for problem, completion in zip(problems, completions[split])
    ]


def main(argv=None):
    args = grading.parse(__doc__, "where to write the programs (JSONL)", argv)
    model_dir = grading.open_submission(args, "grading")
    if model_dir is None:
        return 2

    records = programs(model_dir, args.eval_dir)
    with open(args.out, "w") as f:
        for record in records:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
