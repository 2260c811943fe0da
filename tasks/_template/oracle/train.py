"""Oracle solution for micro-example: supervised fine-tuning on the training answers.

The replay (oracle/replay.jsonl) writes this file to /workspace/code/train.py and runs it as
`python3 code/train.py` (cwd /workspace, PYTHONPATH=/workspace/lib). Only microlm and the env
package are importable there: the task's folder (generate.py, pretrain.py, an expert) is not.
It fine-tunes the base model on prompt -> answer (loss on the answer), reports accuracy on a
slice of the training data held out from fine-tuning, and saves to /workspace/output/final/.
Fill in: your task's recipe; keep every flag the replay passes (tasks/contract_test.py checks them).
"""

from microlm import data, finetune, generate
from micro_example import MAX_NEW_TOKENS, format_completion, format_prompt, reward


def accuracy(model, items):
    completions = generate(model, [format_prompt(it["word"]) for it in items], MAX_NEW_TOKENS)
    return 100.0 * sum(reward(c, it["answer"]) for c, it in zip(completions, items)) / len(items)


def main():
    parser = finetune.parser(__doc__, steps=400, lr=2e-3, warmup=30)
    parser.add_argument("--holdout", type=int, default=200, help="training items kept aside to measure accuracy")
    args = finetune.start(parser)
    held_out, train = finetune.holdout(data.read_jsonl(args.data), args.holdout, args.seed)
    pairs = [(format_prompt(it["word"]), format_completion(it["answer"])) for it in train]
    finetune.run(args, pairs, lambda model: accuracy(model, held_out), "held-out accuracy")


if __name__ == "__main__":
    main()
