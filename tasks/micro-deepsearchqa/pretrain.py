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

import os
import random
import sys

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import GPTConfig, data, pretraining, train  # noqa: E402
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
    parser = pretraining.parser(__doc__, HERE, steps=600, lr=3e-3)
    parser.add_argument("--q", type=float, default=Q)
    args = pretraining.start(parser)
    pairs = demonstrations(data.read_jsonl(args.data), args.q, COPIES, args.seed)
    print(f"{len(pairs)} demonstration pairs", flush=True)
    pretraining.train(CONFIG, args, train.warmup_cosine(args.lr, 100, args.steps), pairs=pairs)


if __name__ == "__main__":
    main()
