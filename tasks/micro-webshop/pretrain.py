"""Make the shipped base model, model/, by imitation of a habit-mixed expert.

    PYTHONPATH=<dir holding microlm and micro_webshop> python3 pretrain.py [--steps N] [--out DIR]

The demonstrator (habit_policy in expert.py, at the task root: not in the env package the agent sees) is the
scripted expert except at the two choices of a purchase: which result to open (the expert's with probability Q,
else always the first) and which size to pick (the wanted one with probability Q, else the first listed). For
every training game, pretrain.py walks all the pages the demonstrator can reach (search page, results, the product
pages it may open, before and after choosing a size) and trains a fresh model to match the demonstrator's action
distribution there: each (prompt(observation) -> action) pair has the action's probability as its weight, the loss
on the action and EOS only. The model thus learns to search with the instruction's words, the expert's rule and
the habit at each choice; the habit weighs more, so greedy decoding mostly follows it and rarely succeeds, while
sampling succeeds in about a quarter of the training games. Seeded and single-threaded: a rerun on the same
machine gives the same weights; the committed model/ is the reference.
"""

import os
import random
import sys

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after the thread settings above)
import torch.nn.functional as F  # noqa: E402

from microlm import GPTConfig, data, pretraining, train  # noqa: E402
from microlm.model import IGNORE_INDEX  # noqa: E402
from micro_webshop import MAX_STEPS, format_prompt, make_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # expert.py lives at the task root, outside the env package the agent sees
from expert import habit_policy  # noqa: E402
CONFIG = GPTConfig(context_len=256, n_layer=2, n_head=4, d_model=96)
Q = 0.35  # probability of the expert's choice at each of the two choices


def demonstrations(games):
    """(prompt, action, probability) for every page the demonstrator can reach in each game."""
    env, triples = make_env(), []
    for game in games:
        frontier = [()]  # action sequences from the start
        while frontier:
            prefix = frontier.pop()
            obs, _ = env.reset(game["seed"], options=game)
            done = False
            for action in prefix:
                obs, _, done, _ = env.step(action)
            if done or len(prefix) >= MAX_STEPS:
                continue
            for action, p in habit_policy(obs, Q):
                triples.append((format_prompt(obs), action, p))
                frontier.append(prefix + (action,))
    return triples


def weighted_batches(triples, batch_size, context_len, seed):
    rng = random.Random(seed)
    order = list(range(len(triples)))
    while True:
        rng.shuffle(order)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            chunk = [triples[j] for j in order[i : i + batch_size]]
            x, y = data.make_batch([(p, a) for p, a, _ in chunk], context_len)
            yield x, y, torch.tensor([w for _, _, w in chunk])


def weighted_loss(model, batch):
    """The probability-weighted cross-entropy of the actions (loss_fn of microlm.train.fit)."""
    x, y, w = batch
    logits, _ = model(x)
    ce = F.cross_entropy(logits.transpose(1, 2), y, ignore_index=IGNORE_INDEX, reduction="none")
    mask = (y != IGNORE_INDEX).float()
    return (ce * w[:, None]).sum() / (mask * w[:, None]).sum()


def main():
    args = pretraining.start(pretraining.parser(__doc__, HERE, steps=1000, lr=2e-3))
    triples = demonstrations(data.read_jsonl(args.data))
    print(f"{len(triples)} weighted demonstration steps", flush=True)
    batches = weighted_batches(triples, args.batch_size, CONFIG.context_len, args.seed)
    lr_at = train.warmup_cosine(args.lr, warmup=100, steps=args.steps)
    pretraining.train(CONFIG, args, lr_at, batches=batches, loss_fn=weighted_loss)


if __name__ == "__main__":
    main()
