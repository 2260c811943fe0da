"""Sample completions of training prompts from a checkpoint and score them.

    python3 -m micro_gsm8k.rollouts --checkpoint DIR --data /workspace/data/train.jsonl \\
        --n 64 [--group-size 8] [--temperature 1.0] [--top-k K] [--seed 0] \\
        [--max-new-tokens 32] --out FILE.jsonl

Picks n / group-size distinct training prompts at random (seeded) and samples
group-size completions for each (the groups GRPO compares). Writes one JSON
line per completion:
    {"prompt_index": i, "prompt": ..., "completion": ..., "answer": ..., "reward": 0.0 or 1.0}
where prompt_index is the item's line number (from 0) in --data, and prints one
JSON summary line on stdout: {"episodes": n, "mean_reward": x, "out": path}.
Progress goes to stderr. The same seed gives the same rollouts: pass a new
--seed for fresh samples. Exit status 2 on a bad checkpoint or bad arguments.
"""

import json

from microlm import sampling

from .prompt import format_prompt
from .reward import reward


def main(argv=None):
    parser = sampling.parser("python3 -m micro_gsm8k.rollouts", __doc__, "JSONL of {question, answer} items", max_new_tokens=32)
    args = parser.parse_args(argv)
    model, items, indices = sampling.prepare(
        args,
        lambda it: isinstance(it, dict) and "question" in it and "answer" in it,
        'every --data line must be a JSON object with "question" and "answer"',
    )
    prompts = [format_prompt(items[i]["question"]) for i in indices for _ in range(args.group_size)]
    completions = sampling.sample(model, prompts, args)

    total = 0.0
    with open(args.out, "w") as f:
        for k, completion in enumerate(completions):
            item = items[indices[k // args.group_size]]
            r = reward(completion, item["answer"])
            total += r
            record = {
                "prompt_index": indices[k // args.group_size],
                "prompt": prompts[k],
                "completion": completion,
                "answer": item["answer"],
                "reward": r,
            }
            f.write(json.dumps(record) + "\n")
    print(json.dumps({"episodes": len(completions), "mean_reward": round(total / len(completions), 4), "out": args.out}))


if __name__ == "__main__":
    main()
