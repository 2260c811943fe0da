"""Oracle solution for micro-webshop: expert iteration (rejection-sampling fine-tuning) on the rollouts.

Run in the sandbox as `cd /workspace && python3 code/train.py --init models/base --out output/round1`
(PYTHONPATH=/workspace/lib), after launch_rollouts has written rollouts/batch-*.jsonl. It reads every rollout
batch there, keeps the successful episodes (per group of the same game, the shortest ones, each distinct action
sequence once), drops steps whose action did nothing, fine-tunes the --init checkpoint on their
(prompt(observation) -> action) pairs with the loss on the action, prints the greedy success on training games
before and after, and saves the result to --out. Alternate it with fresh rollouts from the saved checkpoint.
"""

import argparse
import glob
import json
import os
import random

import torch

from microlm import checkpoint, data
from microlm.episodes import play, summarize
from microlm.train import fit, warmup_cosine
from micro_webshop import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", default="/workspace/models/base", help="checkpoint to start from")
    parser.add_argument("--out", default="/workspace/output/final")
    parser.add_argument("--rollouts", default="/workspace/rollouts", help="folder of batch-*.jsonl")
    parser.add_argument("--data", default="/workspace/data/train.jsonl")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-games", type=int, default=100, help="training games played greedily to measure success")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads; a model this small gains little from more")
    return parser.parse_args()


def successful_pairs(paths):
    """(prompt, action) pairs of the shortest successful episodes of each game group, valid steps only."""
    pairs, episodes, kept = [], 0, 0
    for path in paths:
        groups = {}
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                episodes += 1
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
    return pairs, episodes, kept


def greedy_success(model, games):
    records = play(model, [make_env() for _ in games], games, format_prompt, MAX_STEPS, MAX_NEW_TOKENS, batch_size=len(games))
    return summarize(records)["score"]


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    paths = sorted(glob.glob(os.path.join(args.rollouts, "batch-*.jsonl")))
    pairs, episodes, kept = successful_pairs(paths)
    print(f"{len(paths)} rollout batches, {episodes} episodes: kept {kept} successful episodes, {len(pairs)} steps", flush=True)
    if not pairs:
        raise SystemExit("no successful episodes to learn from")
    with open(args.data) as f:
        games = [json.loads(line) for line in f]
    probe = random.Random(args.seed).sample(games, args.eval_games)

    model = checkpoint.load(args.init)
    print(f"start ({args.init}): greedy success on {len(probe)} training games {greedy_success(model, probe):.1f}%", flush=True)
    batches = data.batches(pairs, args.batch_size, model.config.context_len, seed=args.seed)
    fit(model, batches, args.steps, warmup_cosine(args.lr, 20, args.steps), log_every=25)
    print(f"after: greedy success on {len(probe)} training games {greedy_success(model, probe):.1f}%", flush=True)
    checkpoint.save(model, args.out)
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
