"""Sample completions of training prompts from a checkpoint and score them by running their tests.

    python3 -m micro_humaneval.rollouts --checkpoint DIR --data /workspace/data/train.jsonl \\
        --n 64 [--group-size 8] [--temperature 1.0] [--top-k K] [--seed 0] \\
        [--max-new-tokens 64] [--workers 2] --out FILE.jsonl

Picks n / group-size distinct training problems at random (seeded) and samples
group-size completions for each (the groups GRPO compares). Each completion is
cut before its first non-indented line and appended to the prompt
(micro_humaneval.build_program), and the program is run on the problem's tests
in a separate, resource-limited process (micro_humaneval.execute.run_programs,
`--workers` at a time). Writes one JSON line per completion:
    {"prompt_index": i, "prompt": ..., "completion": ..., "reward": passed / total,
     "passed": tests passed, "total": tests}
where prompt_index is the item's line number (from 0) in --data and completion is
the raw sampled text, and prints one JSON summary line on stdout:
{"episodes": n, "mean_reward": x, "solved": share of completions passing every test, "out": path}.
Progress goes to stderr. The same seed gives the same rollouts: pass a new --seed
for fresh samples. Exit status 2 on a bad checkpoint or bad arguments.
"""

import json
import sys
import time

from microlm import sampling

from .execute import compare, run_programs
from .prompt import build_program, format_prompt


def valid_item(it):
    return (
        isinstance(it, dict)
        and isinstance(it.get("prompt"), str)
        and isinstance(it.get("entry_point"), str)
        and isinstance(it.get("tests"), list)
        and len(it["tests"]) > 0
        and all(isinstance(t, dict) and isinstance(t.get("args"), list) and "expected" in t for t in it["tests"])
    )


def main(argv=None):
    parser = sampling.parser(
        "python3 -m micro_humaneval.rollouts", __doc__, "JSONL of items with prompt, entry_point and tests", max_new_tokens=64
    )
    parser.add_argument("--workers", type=int, default=2, help="programs run at the same time")
    args = parser.parse_args(argv)
    model, items, indices = sampling.prepare(
        args,
        valid_item,
        'every --data line must be an item with "prompt", "entry_point" and "tests" ([{"args": [...], "expected": ...}, ...])',
        positive=[("--workers", args.workers)],
    )
    episode_items = [items[i] for i in indices for _ in range(args.group_size)]
    prompts = [format_prompt(it) for it in episode_items]
    completions = sampling.sample(model, prompts, args)
    print("rollouts: running the tests", file=sys.stderr, flush=True)
    start = time.time()
    jobs = [
        {"program": build_program(p, c), "entry_point": it["entry_point"], "calls": [t["args"] for t in it["tests"]]}
        for p, c, it in zip(prompts, completions, episode_items)
    ]
    outputs = run_programs(jobs, workers=args.workers)
    print(f"rollouts: tests run in {time.time() - start:.1f}s", file=sys.stderr, flush=True)

    total_reward, solved = 0.0, 0
    with open(args.out, "w") as f:
        for k, (completion, item, out) in enumerate(zip(completions, episode_items, outputs)):
            total = len(item["tests"])
            passed = compare(out, [t["expected"] for t in item["tests"]])
            reward = passed / total
            total_reward += reward
            solved += passed == total
            record = {
                "prompt_index": indices[k // args.group_size],
                "prompt": prompts[k],
                "completion": completion,
                "reward": reward,
                "passed": passed,
                "total": total,
            }
            f.write(json.dumps(record) + "\n")
    n = len(completions)
    summary = {"episodes": n, "mean_reward": round(total_reward / n, 4), "solved": round(solved / n, 4), "out": args.out}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
