"""Sample responses to training instructions from a checkpoint, for the server to judge.

    python3 -m micro_alpacaeval.rollouts --checkpoint DIR --data /workspace/data/train.jsonl \\
        --n 64 [--group-size 8] [--temperature 1.0] [--top-k K] [--seed 0] \\
        [--max-new-tokens 128] --out FILE.jsonl

Picks n / group-size distinct training items at random (seeded) and samples
group-size completions for each (the groups GRPO compares). Writes one JSON
line per completion:
    {"prompt_index": i, "instruction": ..., "constraints": [...], "reference": ...,
     "prompt": ..., "completion": ...}
where prompt_index is the item's line number (from 0) in --data, and prints one
JSON summary line on stdout: {"episodes": n, "out": path}. It does not score:
through launch_rollouts the server then has the task's judge compare each
completion with its reference, in both orders, and adds "reward" to each line
(1 win, 0.5 tie, 0 loss, averaged over the two orders). To score yourself, use
micro_alpacaeval.constraints. Progress goes to stderr. The same seed gives the
same rollouts: pass a new --seed for fresh samples. Exit status 2 on a bad
checkpoint or bad arguments.
"""

import json

from microlm import sampling

from .prompt import format_prompt

KEYS = ("instruction", "constraints", "reference")


def main(argv=None):
    parser = sampling.parser(
        "python3 -m micro_alpacaeval.rollouts", __doc__, "JSONL of {instruction, constraints, reference} items", max_new_tokens=128
    )
    args = parser.parse_args(argv)
    model, items, indices = sampling.prepare(
        args,
        lambda it: isinstance(it, dict) and all(k in it for k in KEYS),
        'every --data line must be a JSON object with "instruction", "constraints" and "reference"',
    )
    prompts = [format_prompt(items[i]["instruction"]) for i in indices for _ in range(args.group_size)]
    completions = sampling.sample(model, prompts, args)

    with open(args.out, "w") as f:
        for k, completion in enumerate(completions):
            index = indices[k // args.group_size]
            item = items[index]
            record = {
                "prompt_index": index,
                "instruction": item["instruction"],
                "constraints": item["constraints"],
                "reference": item["reference"],
                "prompt": prompts[k],
                "completion": completion,
            }
            f.write(json.dumps(record) + "\n")
    print(json.dumps({"episodes": len(completions), "out": args.out}))


if __name__ == "__main__":
    main()
