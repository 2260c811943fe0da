"""Sample completions of training prompts from a checkpoint and score them.

    python3 -m micro_example.rollouts --checkpoint DIR --data /workspace/data/train.jsonl \\
        --n 64 [--group-size 8] [--temperature 1.0] [--top-k K] [--seed 0] --out FILE.jsonl

launch_rollouts runs this with the options above (src/rollouts.ts). It picks n / group-size
training items at random (seeded) and samples group-size completions of each. Writes one JSON
line per completion, {"prompt_index", "prompt", "completion", "reward"}, and prints a JSON summary
{"episodes", "mean_reward", "out"} on stdout. Exit status 2 on a bad checkpoint or bad arguments.
A level-3 task's rollouts.py is one call of microlm.episodes.rollouts_main instead.
"""

import json

from microlm import sampling

from . import MAX_NEW_TOKENS, format_prompt, reward


def main(argv=None):
    parser = sampling.parser("python3 -m micro_example.rollouts", __doc__, "JSONL of {word, answer} items", MAX_NEW_TOKENS)
    args = parser.parse_args(argv)
    model, items, indices = sampling.prepare(
        args, lambda it: isinstance(it, dict) and "word" in it and "answer" in it, 'every --data line needs "word" and "answer"'
    )
    chosen = [i for i in indices for _ in range(args.group_size)]
    prompts = [format_prompt(items[i]["word"]) for i in chosen]
    rows = [
        {"prompt_index": i, "prompt": p, "completion": c, "reward": reward(c, items[i]["answer"])}
        for i, p, c in zip(chosen, prompts, sampling.sample(model, prompts, args))
    ]
    with open(args.out, "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    mean = sum(row["reward"] for row in rows) / len(rows)
    print(json.dumps({"episodes": len(rows), "mean_reward": round(mean, 4), "out": args.out}))


if __name__ == "__main__":
    main()
