"""Training batches of (prompt, completion) pairs with the loss on the completion only.

Supervised fine-tuning in a few lines:

    from microlm import checkpoint, data
    model = checkpoint.load("/workspace/models/base"); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for x, y in data.batches(pairs, batch_size=32, context_len=model.config.context_len, seed=0):
        _, loss = model(x, y)
        opt.zero_grad(); loss.backward(); opt.step()

Each sequence is BOS + prompt + completion + EOS, right-padded with PAD. The
target at position t is token t+1 where that token belongs to the completion
(its final EOS included) and IGNORE_INDEX (-100) elsewhere, so the model is
trained to write the completion and to stop, not to predict the prompt.

read_jsonl(path) reads a data file such as /workspace/data/train.jsonl (one JSON object a line).
"""

import json
import random

import torch

from . import tokenizer
from .model import IGNORE_INDEX


def read_jsonl(path):
    """The JSON objects of a JSONL file, one a line (blank lines skipped), as a list."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def make_batch(pairs, context_len):
    """Tensors (x, y), both (B, T) int64, for a list of (prompt, completion) strings.

    T is the longest sequence in the batch, minus one. A sequence longer than
    context_len + 1 tokens loses the start of its prompt.
    """
    seqs, starts = [], []
    for prompt, completion in pairs:
        p = [tokenizer.BOS] + tokenizer.encode(prompt, unknown="replace")
        c = tokenizer.encode(completion, unknown="replace") + [tokenizer.EOS]
        cut = max(0, len(p) + len(c) - (context_len + 1))
        seqs.append((p + c)[cut:])
        starts.append(len(p) - cut)  # index of the first completion token
    T = max(len(s) for s in seqs) - 1
    x = torch.full((len(seqs), T), tokenizer.PAD, dtype=torch.long)
    y = torch.full((len(seqs), T), IGNORE_INDEX, dtype=torch.long)
    for row, (s, start) in enumerate(zip(seqs, starts)):
        x[row, : len(s) - 1] = torch.tensor(s[:-1])
        first = max(start - 1, 0)  # position whose next token is the first completion token
        y[row, first : len(s) - 1] = torch.tensor(s[first + 1 :])
    return x, y


def batches(pairs, batch_size, context_len, seed=0, epochs=None):
    """Yield (x, y) batches of shuffled pairs, epoch after epoch (forever if epochs is None).

    The shuffle is seeded, so the same seed gives the same batches.
    """
    rng = random.Random(seed)
    order = list(range(len(pairs)))
    epoch = 0
    while epochs is None or epoch < epochs:
        rng.shuffle(order)
        for i in range(0, len(order), batch_size):
            yield make_batch([pairs[j] for j in order[i : i + batch_size]], context_len)
        epoch += 1


def completion_logprobs(model, x, y):
    """Sum of log-probabilities of each sequence's completion tokens: a (B,) tensor.

    With x, y from make_batch this is log p(completion | prompt) under the model,
    differentiable, as policy-gradient methods (REINFORCE, GRPO, ...) need.
    """
    logits, _ = model(x)
    logp = torch.log_softmax(logits, dim=-1)
    keep = y != IGNORE_INDEX
    picked = logp.gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (picked * keep).sum(dim=1)
