"""Oracle solution for micro-alfworld: expert iteration (rejection-sampling fine-tuning) on online rollouts.

Run in the sandbox as `cd /workspace && python3 code/rl_train.py --base CKPT --rollouts FILE... --out DIR`
(PYTHONPATH=/workspace/lib), after `launch_rollouts` has played episodes with CKPT as the policy. It keeps the
successful episodes of the rollout files, the shortest one per game, drops the steps whose action was invalid
(the next observation starts with "Nothing happens."), fine-tunes CKPT on their (observation -> action) pairs
with the loss on the action only, prints the greedy success on some training games before and after, and
saves the result to --out. One round: rollouts from the current policy, then this; repeat with the new
checkpoint and the union of all successes so far.
"""

import json
import os
import random

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): the sandbox sizes the pools to
# the job's CPUs, and a model this small gains little from a second thread, which spins and is charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import data, episodes, finetune  # noqa: E402
from micro_alfworld import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env  # noqa: E402


def kept_pairs(paths):
    """(prompt, action) pairs of the shortest successful episode of each game, invalid steps dropped."""
    best = {}
    total = successes = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                episode = json.loads(line)
                total += 1
                if not episode.get("success"):
                    continue
                successes += 1
                key = episode.get("game_index", episode["seed"])
                if key not in best or episode["length"] < best[key]["length"]:
                    best[key] = episode
    pairs = []
    for episode in best.values():
        steps = episode["steps"]
        for i, step in enumerate(steps):
            invalid = i + 1 < len(steps) and steps[i + 1]["observation"].startswith("Nothing happens.")
            if not invalid:
                pairs.append((format_prompt(step["observation"]), step["action"]))
    print(f"rollouts: {total} episodes, {successes} successes, {len(best)} games solved, {len(pairs)} steps kept", flush=True)
    return pairs


def main():
    parser = finetune.parser(__doc__, lr=1e-3, start_help="checkpoint to fine-tune (the policy of the last rollouts)")
    parser.add_argument("--rollouts", nargs="+", required=True, help="rollout JSONL files (launch_rollouts output)")
    parser.add_argument("--epochs", type=float, default=3.0, help="passes over the kept steps")
    parser.add_argument("--min-steps", type=int, default=40)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--check-games", type=int, default=60, help="training games played greedily to measure success")
    args = finetune.start(parser)
    pairs = kept_pairs(args.rollouts)
    if not pairs:
        raise SystemExit("no successful episode to learn from: sample more rollouts (or at a higher temperature)")
    check = random.Random(args.seed + 1).sample(data.read_jsonl(args.data), args.check_games)
    steps = int(min(args.max_steps, max(args.min_steps, args.epochs * len(pairs) / args.batch_size)))
    success = lambda model: episodes.greedy_success(model, check, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)
    finetune.run(args, pairs, success, f"greedy success on {len(check)} training games", steps=steps, warmup=10, log_every=25)


if __name__ == "__main__":
    main()
