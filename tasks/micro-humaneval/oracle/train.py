"""Oracle solution for micro-humaneval: supervised fine-tuning on the canonical solutions.

Run in the sandbox as `cd /workspace && python3 code/train.py` (PYTHONPATH=/workspace/lib).
It fine-tunes the base model on prompt -> canonical body, with the loss on the
body (and its EOS) only and a higher learning rate than the base model was
trained with, checks pass@1 on a slice of the training data held out from
fine-tuning (running the tests as the grader does), and saves the result to
/workspace/output/final/.
"""

import os

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): the sandbox sizes the pools to
# the job's CPUs, and a model this small gains little from a second thread, which spins and is charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import data, finetune, generate  # noqa: E402
from micro_humaneval import build_program, format_completion, format_prompt  # noqa: E402
from micro_humaneval.execute import compare, run_programs  # noqa: E402


def pass_at_1(model, items):
    """Percentage of items whose greedy program passes every test (the grader's rule)."""
    prompts = [format_prompt(it) for it in items]
    completions = generate(model, prompts, max_new_tokens=64)
    jobs = [
        {"program": build_program(p, c), "entry_point": it["entry_point"], "calls": [t["args"] for t in it["tests"]]}
        for p, c, it in zip(prompts, completions, items)
    ]
    outputs = run_programs(jobs)
    solved = sum(compare(o, [t["expected"] for t in it["tests"]]) == len(it["tests"]) for o, it in zip(outputs, items))
    return 100.0 * solved / len(items)


def main():
    parser = finetune.parser(__doc__, steps=600, lr=2e-3, warmup=30)
    parser.add_argument("--holdout", type=int, default=200, help="training items kept aside to measure pass@1")
    args = finetune.start(parser)
    held_out, train = finetune.holdout(data.read_jsonl(args.data), args.holdout, args.seed)
    pairs = [(format_prompt(it), format_completion(it)) for it in train]
    finetune.run(args, pairs, lambda model: pass_at_1(model, held_out), "held-out pass@1")


if __name__ == "__main__":
    main()
