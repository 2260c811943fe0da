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

import argparse
import json
import os
import random
import sys

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after the thread settings above)
import torch.nn.functional as F  # noqa: E402

from microlm import GPT, GPTConfig, checkpoint, data, train  # noqa: E402
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


def fit_weighted(model, batches, steps, lr_at, log_every=50):
    """AdamW on the probability-weighted cross-entropy of the actions (like microlm.train.fit)."""
    import time

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr_at(1), betas=(0.9, 0.99), weight_decay=0.0)
    start = time.time()
    for step in range(1, steps + 1):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        x, y, w = next(batches)
        logits, _ = model(x)
        ce = F.cross_entropy(logits.transpose(1, 2), y, ignore_index=IGNORE_INDEX, reduction="none")
        mask = (y != IGNORE_INDEX).float()
        loss = (ce * w[:, None]).sum() / (mask * w[:, None]).sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0 or step == steps:
            print(f"step {step}/{steps} loss {loss.item():.3f} lr {lr_at(step):.2e} {time.time() - start:.0f}s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(HERE, "data", "train.jsonl"))
    parser.add_argument("--out", default=os.path.join(HERE, "model"))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    with open(args.data) as f:
        games = [json.loads(line) for line in f]
    triples = demonstrations(games)
    print(f"{len(triples)} weighted demonstration steps", flush=True)
    model = GPT(CONFIG)
    batches = weighted_batches(triples, args.batch_size, CONFIG.context_len, args.seed)
    fit_weighted(model, batches, args.steps, train.warmup_cosine(args.lr, warmup=100, steps=args.steps))
    checkpoint.save(model, args.out)
    print(f"saved {model.num_params()} parameters to {args.out}")


if __name__ == "__main__":
    main()
