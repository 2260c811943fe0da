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

import argparse
import json
import random
import sys
import time

import torch

from microlm import CheckpointError, checkpoint, generate

from .execute import compare, run_programs
from .prompt import build_program, format_prompt


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


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
    parser = argparse.ArgumentParser(
        prog="python3 -m micro_humaneval.rollouts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (config.json + model.pt)")
    parser.add_argument("--data", required=True, help="JSONL of items with prompt, entry_point and tests")
    parser.add_argument("--n", type=int, required=True, help="total number of completions")
    parser.add_argument("--group-size", type=int, default=1, help="completions per prompt; must divide n")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="programs run at the same time")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", required=True, help="output JSONL path")
    args = parser.parse_args(argv)

    if args.n < 1 or args.group_size < 1 or args.n % args.group_size:
        fail(f"--n ({args.n}) must be a positive multiple of --group-size ({args.group_size})")
    if args.temperature < 0 or args.max_new_tokens < 1 or args.batch_size < 1 or args.workers < 1 or (args.top_k or 1) < 1:
        fail("--temperature must be >= 0; --max-new-tokens, --batch-size, --workers and --top-k must be >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        model = checkpoint.load(args.checkpoint)
    except CheckpointError as e:
        fail(f"invalid checkpoint: {e}")
    try:
        with open(args.data) as f:
            items = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read --data: {e}")
    if not all(valid_item(it) for it in items):
        fail('every --data line must be an item with "prompt", "entry_point" and '
             '"tests" ([{"args": [...], "expected": ...}, ...])')
    n_prompts = args.n // args.group_size
    if n_prompts > len(items):
        fail(f"--n / --group-size = {n_prompts} prompts, but --data has only {len(items)} items")
    if args.max_new_tokens > model.config.context_len - 2:
        fail(f"--max-new-tokens must be at most the model's context_len - 2 ({model.config.context_len - 2})")

    indices = random.Random(args.seed).sample(range(len(items)), n_prompts)
    episode_items = [items[i] for i in indices for _ in range(args.group_size)]
    prompts = [format_prompt(it) for it in episode_items]
    print(f"rollouts: sampling {len(prompts)} completions", file=sys.stderr, flush=True)
    start = time.time()
    completions = generate(
        model, prompts, args.max_new_tokens,
        temperature=args.temperature, top_k=args.top_k, seed=args.seed, batch_size=args.batch_size,
    )
    print(f"rollouts: sampled in {time.time() - start:.1f}s; running the tests", file=sys.stderr, flush=True)
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
