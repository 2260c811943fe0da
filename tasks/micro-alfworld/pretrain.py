"""Make the shipped base model, model/, by imitating a habit-mixed expert on the training games.

    PYTHONPATH=<dir holding microlm and micro_alfworld> python3 pretrain.py [--steps N] [--q Q] [--out DIR]

The demonstrator is the scripted expert except at its critical decisions: right after taking the goal object
(held, not yet treated) where the expert would walk on ("go ..."), it takes the expert action with probability q
and otherwise the one habit action "put" (drop the object where it stands, which ends the episode as a failure).
That is one decision per episode, two in pick_two; none when the object already lies where the goal wants it. So the base model
knows the whole expert rule but prefers the habit at those decisions: greedy play mostly fails, sampled play
succeeds now and then, and reinforcing its successes lifts it. Now and then the demonstrator also makes a stray
move (a wasted "go", an invalid action) that is not trained on, so that the model sees such states too.
The model is trained on (prompt, action) pairs, loss on the action and EOS only. Seeded and single-threaded.
The expert and the demonstrator live in expert.py (task root, not mounted in the agent's sandbox).
"""

import os
import random
import sys

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads).
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import GPTConfig, data, pretraining, train  # noqa: E402  (after the thread settings above)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # expert.py lives at the task root, outside the agent-visible env package
from expert import demonstrate  # noqa: E402

CONFIG = GPTConfig(context_len=256, n_layer=2, n_head=4, d_model=96)


def main():
    parser = pretraining.parser(__doc__, HERE, steps=2200, lr=2e-3)
    parser.add_argument("--q", type=float, default=0.45, help="chance of the expert action at a critical decision")
    parser.add_argument("--passes", type=int, default=2, help="demonstrations per training game")
    args = pretraining.start(parser)
    rng = random.Random(args.seed)
    games = data.read_jsonl(args.data)
    pairs = [p for _ in range(args.passes) for g in games for p in demonstrate(g, args.q, rng)]
    print(f"{len(pairs)} demonstration steps", flush=True)
    pretraining.train(CONFIG, args, train.warmup_cosine(args.lr, 100, args.steps), pairs=pairs, log_every=250)


if __name__ == "__main__":
    main()
