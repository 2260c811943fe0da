"""Oracle for micro-deepsearchqa: expert iteration (rejection-sampling fine-tuning) on online rollouts.

Run in the sandbox after launch_rollouts, e.g.
    python3 code/rl_train.py --init models/base --rollouts rollouts/batch-001.jsonl --out output/round1
    python3 code/rl_train.py --init output/round1 --rollouts rollouts/batch-001.jsonl rollouts/batch-002.jsonl --out output/round2
(cwd /workspace, PYTHONPATH=/workspace/lib). It keeps the successful episodes of the given batches
(the shortest ones of each game's group, one copy of each distinct trajectory), drops steps whose
action was not understood, fine-tunes the --init checkpoint on their (prompt(observation) -> action)
pairs, prints the greedy success on a few training games before and after, and saves to --out.
"""

import json
import os
import random

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): the sandbox sizes the pools to
# the job's CPUs, and a model this small gains little from a second thread, which spins and is charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import data, episodes, finetune  # noqa: E402
from micro_deepsearchqa import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env  # noqa: E402


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


def main():
    parser = finetune.parser(__doc__, start="--init", steps=150, lr=1e-3)
    parser.add_argument("--rollouts", nargs="+", required=True, help="rollout batches (JSONL) whose successes to learn from")
    parser.add_argument("--check-games", type=int, default=96, help="training games played greedily to report success")
    args = finetune.start(parser)
    check = random.Random(args.seed).sample(data.read_jsonl(args.data), args.check_games)
    pairs, solved = successful_pairs(args.rollouts)
    print(f"{len(pairs)} (observation, action) pairs from successful episodes of {solved} games", flush=True)
    success = lambda model: episodes.greedy_success(model, check, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)
    finetune.run(args, pairs, success, f"greedy success on {len(check)} training games", warmup=10, log_every=25)


if __name__ == "__main__":
    main()
