"""Make the shipped base model, model/, from habit-mixed expert demonstrations.

    PYTHONPATH=<dir holding microlm and micro_deepsearchqa> python3 pretrain.py [--steps N] [--out DIR]

The demonstrator plays every training game along the path of the scripted expert (expert.py at the
task root, deliberately not part of the env package the agent sees). At its two decisions (which
link to open in the search results, which link to answer in the opened document) the training
target is the expert's action with probability Q and otherwise the habit action, always link 1
(search[#1], answer[#1]); every draw is made COPIES times per state. The model (loss on the action
and EOS) learns the format and the expert's rule, but its greedy choice is the habit, which is
right only when the needed link happens to come first. Seeded and single-threaded.
"""

import argparse
import json
import os
import random
import sys

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402

from microlm import GPT, GPTConfig, checkpoint, data, train  # noqa: E402
from micro_deepsearchqa import format_prompt, make_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # expert.py lives at the task root, outside the sandbox-mounted env package

from expert import critical, expert  # noqa: E402

CONFIG = GPTConfig(context_len=256, n_layer=2, n_head=4, d_model=64)
Q = 0.35
COPIES = 4


def demonstrations(games, q, copies, seed):
    rng = random.Random(seed)
    pairs = []
    for game in games:
        env = make_env()
        obs, _ = env.reset(game["seed"], options=game)
        for _ in range(6):
            action = expert(obs)
            habit = critical(obs)
            for _ in range(copies):
                target = action if habit is None or rng.random() < q else habit
                pairs.append((format_prompt(obs), target))
            obs, _, done, _ = env.step(action)
            if done:
                break
    return pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(HERE, "data", "train.jsonl"))
    parser.add_argument("--out", default=os.path.join(HERE, "model"))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--q", type=float, default=Q)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    with open(args.data) as f:
        games = [json.loads(line) for line in f]
    pairs = demonstrations(games, args.q, COPIES, args.seed)
    print(f"{len(pairs)} demonstration pairs", flush=True)
    model = GPT(CONFIG)
    batches = data.batches(pairs, args.batch_size, CONFIG.context_len, seed=args.seed)
    train.fit(model, batches, args.steps, train.warmup_cosine(args.lr, 100, args.steps))
    checkpoint.save(model, args.out)
    print(f"saved {model.num_params()} parameters to {args.out}")


if __name__ == "__main__":
    main()
