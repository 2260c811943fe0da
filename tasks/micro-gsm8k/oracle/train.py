"""Oracle solution for micro-gsm8k: supervised fine-tuning on the training answers.

Run in the sandbox as `cd /workspace && python3 code/train.py` (PYTHONPATH=/workspace/lib).
It fine-tunes the base model on prompt -> worked answer, with the loss on the
answer only and a higher learning rate than the base model was trained with,
checks exact-answer accuracy on a slice of the training data held out from
fine-tuning, and saves the result to /workspace/output/final/.
"""

import os

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): the sandbox sizes the pools to
# the job's CPUs, and a model this small gains little from a second thread, which spins and is charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import data, finetune, generate  # noqa: E402
from micro_gsm8k import format_completion, format_prompt, reward  # noqa: E402


def accuracy(model, items):
    completions = generate(model, [format_prompt(it["question"]) for it in items], max_new_tokens=32)
    return 100.0 * sum(reward(c, it["answer"]) for c, it in zip(completions, items)) / len(items)


def main():
    parser = finetune.parser(__doc__, steps=600, lr=2e-3, warmup=30)
    parser.add_argument("--holdout", type=int, default=200, help="training items kept aside to measure accuracy")
    args = finetune.start(parser)
    held_out, train = finetune.holdout(data.read_jsonl(args.data), args.holdout, args.seed)
    pairs = [(format_prompt(it["question"]), format_completion(it["answer"])) for it in train]
    finetune.run(args, pairs, lambda model: accuracy(model, held_out), "held-out accuracy")


if __name__ == "__main__":
    main()
