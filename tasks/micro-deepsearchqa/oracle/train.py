"""Oracle for micro-deepsearchqa: expert iteration (rejection-sampling fine-tuning) on online rollouts.

Run in the sandbox after launch_rollouts, e.g.
    python3 code/train.py --init models/base --rollouts rollouts/batch-001.jsonl --out output/round1
    python3 code/train.py --init output/round1 --rollouts rollouts/batch-001.jsonl rollouts/batch-002.jsonl --out output/round2
(cwd /workspace, PYTHONPATH=/workspace/lib). It keeps the successful episodes of the given batches
(the shortest ones of each game's group, one copy of each distinct trajectory), drops steps whose
action was not understood, fine-tunes the --init checkpoint on their (prompt(observation) -> action)
pairs, prints the greedy success on a few training games before and after, and saves to --out.
"""

import argparse
import json
import os
import random

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

from microlm import checkpoint, data, episodes  # noqa: E402
from microlm.train import fit, warmup_cosine  # noqa: E402
from micro_deepsearchqa import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", default="/workspace/models/base", help="checkpoint to fine-tune")
    parser.add_argument("--rollouts", nargs="+", required=True, help="rollout batches (JSONL) whose successes to learn from")
    parser.add_argument("--data", default="/workspace/data/train.jsonl")
    parser.add_argument("--out", default="/workspace/output/final")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--check-games", type=int, default=96, help="training games played greedily to report success")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def successful_pairs(paths):
    groups = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                if record.get("success"):
                    groups.setdefault((path, record["game_index"]), []).append(record)
    pairs, seen = [], set()
    for records in groups.values():
        shortest = min(r["length"] for r in records)
        for record in records:
            if record["length"] != shortest:
                continue
            steps = record["steps"]
            for i, step in enumerate(steps):
                nxt = steps[i + 1]["observation"] if i + 1 < len(steps) else ""
                if "\nNothing happens." in nxt:
                    continue  # the action was not understood
                key = (step["observation"], step["action"])
                if key not in seen:
                    seen.add(key)
                    pairs.append((format_prompt(step["observation"]), step["action"]))
    return pairs, len(groups)


def greedy_success(model, games):
    records = episodes.play(model, [make_env() for _ in games], games, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)
    return 100.0 * sum(r["success"] for r in records) / len(records)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    with open(args.data) as f:
        games = [json.loads(line) for line in f]
    check = random.Random(args.seed).sample(games, args.check_games)
    pairs, solved = successful_pairs(args.rollouts)
    print(f"{len(pairs)} (observation, action) pairs from successful episodes of {solved} games", flush=True)
    model = checkpoint.load(args.init)
    print(f"init greedy success on {len(check)} training games: {greedy_success(model, check):.1f}%", flush=True)
    batches = data.batches(pairs, args.batch_size, model.config.context_len, seed=args.seed)
    fit(model, batches, args.steps, warmup_cosine(args.lr, 10, args.steps), log_every=25)
    print(f"greedy success on {len(check)} training games: {greedy_success(model, check):.1f}%", flush=True)
    checkpoint.save(model, args.out)
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
