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

from hflm import humaneval  # noqa: E402  (after the thread settings above)
from hflm.inference import generate  # noqa: E402
from hflm.submission import SubmissionError, materialise  # noqa: E402

SPLITS = ("public", "private")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the submitted folder (full model or LoRA adapter)")
    parser.add_argument("--base", required=True, help="the run's base model folder")
    parser.add_argument("--base-id", help="the base model's hub id, e.g. Qwen/Qwen2.5-1.5B-Instruct")
    parser.add_argument("--eval-dir", required=True, help="directory with public.jsonl and private.jsonl")
    parser.add_argument("--out", required=True, help="where to write the programs (JSONL)")
    return parser.parse_args(argv)


def read_split(eval_dir, split):
    with open(os.path.join(eval_dir, f"{split}.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def programs(model_dir, eval_dir):
    """The phase-1 records of every evaluation problem, public first."""
    records = []
    for split in SPLITS:
        problems = read_split(eval_dir, split)
        start = time.time()
        completions = generate(model_dir, [humaneval.messages(p) for p in problems], humaneval.GENERATION)
        for problem, completion in zip(problems, completions):
            program = humaneval.build_program(problem, humaneval.extract_code(completion))
            records.append({"id": problem["task_id"], "split": split, "program": program})
        print(f"{split}: {len(problems)} programs in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    return records


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

    records = programs(model_dir, args.eval_dir)
    with open(args.out, "w") as f:
        for record in records:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
