"""Oracle solution for micro-webshop: expert iteration (rejection-sampling fine-tuning) on the rollouts.

Run in the sandbox as `cd /workspace && python3 code/rl_train.py --init models/base --out output/round1`
(PYTHONPATH=/workspace/lib), after launch_rollouts has written rollouts/batch-*.jsonl. It reads every rollout
batch there, keeps the successful episodes (per group of the same game, the shortest ones, each distinct action
sequence once), drops steps whose action did nothing, fine-tunes the --init checkpoint on their
(prompt(observation) -> action) pairs with the loss on the action, prints the greedy success on training games
before and after, and saves the result to --out. Alternate it with fresh rollouts from the saved checkpoint.
"""

import glob
import json
import os
import random

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): the sandbox sizes the pools to
# the job's CPUs, and a model this small gains little from a second thread, which spins and is charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import data, episodes, finetune  # noqa: E402
from micro_webshop import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env  # noqa: E402


def successful_pairs(paths):
    """(prompt, action) pairs of the shortest successful episodes of each game group, valid steps only."""
    pairs, total, kept = [], 0, 0
    for path in paths:
        groups = {}
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                total += 1
                if record["success"]:
                    groups.setdefault(record["game_index"], []).append(record)
        for records in groups.values():
            shortest = min(r["length"] for r in records)
            seen = set()
            for r in records:
                actions = tuple(s["action"] for s in r["steps"])
                if r["length"] != shortest or actions in seen:
                    continue
                seen.add(actions)
                kept += 1
                steps = r["steps"]
                for i, s in enumerate(steps):
                    invalid = i + 1 < len(steps) and steps[i + 1]["observation"].startswith("nothing happens.")
                    if not invalid:
                        pairs.append((format_prompt(s["observation"]), s["action"]))
    return pairs, total, kept


def main():
    parser = finetune.parser(__doc__, start="--init", start_help="checkpoint to start from", steps=200, lr=1e-3)
    parser.add_argument("--rollouts", default="/workspace/rollouts", help="folder of batch-*.jsonl")
    parser.add_argument("--eval-games", type=int, default=100, help="training games played greedily to measure success")
    args = finetune.start(parser)
    paths = sorted(glob.glob(os.path.join(args.rollouts, "batch-*.jsonl")))
    pairs, total, kept = successful_pairs(paths)
    print(f"{len(paths)} rollout batches, {total} episodes: kept {kept} successful episodes, {len(pairs)} steps", flush=True)
    if not pairs:
        raise SystemExit("no successful episodes to learn from")
    probe = random.Random(args.seed).sample(data.read_jsonl(args.data), args.eval_games)
    success = lambda model: episodes.greedy_success(
        model, probe, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS, batch_size=len(probe)
    )
    finetune.run(args, pairs, success, f"greedy success on {len(probe)} training games", warmup=20, log_every=25)


if __name__ == "__main__":
    main()
