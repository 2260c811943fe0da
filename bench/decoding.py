"""Speed of the shared decoder (microlm) against decoding without a cache, in the same run.

    /usr/bin/python3 bench/decoding.py [--prompts 400] [--floor-prompts 40] [--games 64] [--floor-games 4]

Prints one JSON object:
  grading    micro-gsm8k's grading decode (its evaluation prompts, 32 new tokens, batches of 100), items/s
  episodes   micro-alfworld's greedy play of evaluation games (its grader's settings), episodes/s
each with the same work done by `greedy_without_cache` (one prompt at a time, the whole sequence
per token) on a subset, and the ratio of the two rates. One torch thread, as the graders run.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402

TASKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks")
sys.path.insert(0, TASKS)

from microlm import checkpoint, episodes  # noqa: E402
from microlm.decode import generate, greedy_without_cache  # noqa: E402


def eval_items(task, n):
    items = []
    for split in ("public", "private"):
        with open(os.path.join(TASKS, task, "eval", f"{split}.jsonl")) as f:
            items += [json.loads(line) for line in f if line.strip()]
    return items[:n]


def rate(n, run):
    start = time.perf_counter()
    run()
    return n / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=400)
    parser.add_argument("--floor-prompts", type=int, default=40)
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--floor-games", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    lib = tempfile.mkdtemp(prefix="a2rl-bench-decoding-")
    try:
        for task, package in (("micro-gsm8k", "micro_gsm8k"), ("micro-alfworld", "micro_alfworld")):
            os.symlink(os.path.join(TASKS, task, "env"), os.path.join(lib, package))
        sys.path.insert(0, lib)
        import micro_alfworld
        import micro_gsm8k

        model = checkpoint.load(os.path.join(TASKS, "micro-gsm8k", "model"))
        prompts = [micro_gsm8k.format_prompt(item["question"]) for item in eval_items("micro-gsm8k", args.prompts)]
        cached = rate(len(prompts), lambda: generate(model, prompts, 32, batch_size=100))
        floor = rate(args.floor_prompts, lambda: greedy_without_cache(model, prompts[: args.floor_prompts], 32))

        policy = checkpoint.load(os.path.join(TASKS, "micro-alfworld", "model"))

        def play(games, decode):
            original = episodes.generate
            episodes.generate = decode
            try:
                envs = [micro_alfworld.make_env() for _ in games]
                episodes.play(policy, envs, games, micro_alfworld.format_prompt, micro_alfworld.MAX_STEPS,
                              micro_alfworld.MAX_NEW_TOKENS, batch_size=len(games))
            finally:
                episodes.generate = original

        games = eval_items("micro-alfworld", args.games)
        played = rate(len(games), lambda: play(games, generate))
        played_floor = rate(args.floor_games, lambda: play(games[: args.floor_games], lambda m, p, n, **_: greedy_without_cache(m, p, n)))
        print(json.dumps({
            "grading": {"task": "micro-gsm8k", "items": len(prompts), "items_per_s": round(cached, 1),
                        "without_cache_items_per_s": round(floor, 1), "ratio": round(cached / floor, 1)},
            "episodes": {"task": "micro-alfworld", "episodes": len(games), "episodes_per_s": round(played, 1),
                         "without_cache_episodes_per_s": round(played_floor, 1), "ratio": round(played / played_floor, 1)},
        }))
    finally:
        shutil.rmtree(lib)


if __name__ == "__main__":
    main()
