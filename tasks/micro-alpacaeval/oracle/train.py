"""Oracle solution for micro-alpacaeval: supervised fine-tuning on the references that obey every constraint.

Run in the sandbox as `cd /workspace && python3 code/train.py` (PYTHONPATH=/workspace/lib).
About a third of the training references break one of their constraints, and the
judge prefers whichever response obeys more of them, so imitating every reference
would also imitate its mistakes. The constraint checkers are public
(micro_alpacaeval.constraints): keep only the references that pass all their
checks, fine-tune on prompt -> reference with the loss on the reference, measure
on a slice of the training data held out from fine-tuning how often greedy
responses obey all their constraints, and save to /workspace/output/final/.
"""

import os

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): a model
# this small gains nothing from more, and idle threads spinning would be charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import data, finetune, generate  # noqa: E402  (after the thread settings above)
from micro_alpacaeval import constraints, format_completion, format_prompt  # noqa: E402


def obeyed(model, items):
    """Percentage of items whose greedy response satisfies all its constraints (128 new tokens, as graded)."""
    responses = generate(model, [format_prompt(it["instruction"]) for it in items], max_new_tokens=128)
    return 100.0 * sum(not constraints.failed(it["constraints"], r) for it, r in zip(items, responses)) / len(items)


def main():
    parser = finetune.parser(__doc__, steps=1800, lr=2e-3, warmup=30, batch_size=16)
    parser.add_argument("--holdout", type=int, default=100, help="training items kept aside to measure obedience")
    args = finetune.start(parser)
    held_out, train = finetune.holdout(data.read_jsonl(args.data), args.holdout, args.seed)
    clean = [it for it in train if not constraints.failed(it["constraints"], it["reference"])]
    print(f"{len(clean)} of {len(train)} training references obey all their constraints", flush=True)
    pairs = [(format_prompt(it["instruction"]), format_completion(it["reference"])) for it in clean]
    finetune.run(args, pairs, lambda model: obeyed(model, held_out), "held-out all-obeyed")


if __name__ == "__main__":
    main()
