"""Batched text generation for `microlm.model.GPT`.

    texts = generate(model, ["Q: ...\\nA: ", ...], max_new_tokens=40)            # greedy
    texts = generate(model, prompts, 40, temperature=1.0, top_k=20, seed=123)  # sampled

Returns the completions only (the prompt is not repeated), cut at the first EOS.
Greedy decoding, and sampling with a given seed, are deterministic for the same
model, prompts, batch_size and thread count.

Each batch runs the prompts once, then one token per step with the keys and values of
earlier positions cached (`microlm.model.KVCache`); a row that wrote EOS leaves the batch.
Greedy output is exactly greedy decoding by definition (tasks/microlm/test_decode.py checks
it on every task's base model).
"""

import torch

from . import tokenizer
from .model import KVCache


@torch.no_grad()
def generate(model, prompts, max_new_tokens, temperature=0.0, top_k=None, seed=None, batch_size=64):
    """Complete each prompt; returns one string per prompt, in order.

    temperature: 0 picks the most likely token (greedy); > 0 samples from softmax(logits / T).
    top_k:       when sampling, only the k most likely tokens are candidates.
    seed:        seeds the sampler (None: a fresh, unseeded generator).
    batch_size:  prompts decoded together; prompts are grouped by length to limit padding.
    A prompt longer than context_len - max_new_tokens - 1 keeps only its last tokens.
    """
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    ctx = model.config.context_len
    keep = ctx - max_new_tokens - 1  # room for BOS + prompt + completion
    if keep < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens} leaves no room in context_len={ctx}")
    was_training = model.training
    model.eval()
    gen = torch.Generator()
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    encoded = [[tokenizer.BOS] + tokenizer.encode(p, unknown="replace")[-keep:] for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
    out = [None] * len(prompts)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        texts = _generate_batch(model, [encoded[i] for i in chunk], max_new_tokens, temperature, top_k, gen)
        for i, text in zip(chunk, texts):
            out[i] = text
    model.train(was_training)
    return out


@torch.no_grad()
def greedy_without_cache(model, prompts, max_new_tokens):
    """Greedy decoding by its definition, for tests and benchmarks: one prompt at a time, no
    padding, no cache, the whole sequence through the model for every new token. `generate`
    gives exactly these completions, many times faster."""
    keep = model.config.context_len - max_new_tokens - 1
    out = []
    for prompt in prompts:
        seq = [tokenizer.BOS] + tokenizer.encode(prompt, unknown="replace")[-keep:]
        completion = []
        for _ in range(max_new_tokens):
            logits, _ = model(torch.tensor([seq]))
            token = int(logits[0, -1].argmax())
            if token == tokenizer.EOS:
                break
            completion.append(token)
            seq.append(token)
        out.append(tokenizer.decode(completion))
    return out


def _generate_batch(model, seqs, max_new_tokens, temperature, top_k, gen):
    B, L = len(seqs), max(len(s) for s in seqs)
    # Left-pad so every sequence's next token lands in the last column.
    idx = torch.full((B, L), tokenizer.PAD, dtype=torch.long)
    attn_mask = torch.zeros(B, L + max_new_tokens, dtype=torch.bool)
    for row, s in enumerate(seqs):
        idx[row, L - len(s) :] = torch.tensor(s)
        attn_mask[row, L - len(s) :] = True  # the generated positions are real tokens too
    pos = (attn_mask[:, :L].long().cumsum(1) - 1).clamp(min=0)  # real tokens start at position 0
    cache = KVCache(model.config.n_layer, L + max_new_tokens)
    new_tokens = torch.full((B, max_new_tokens), tokenizer.EOS, dtype=torch.long)
    # Rows still being decoded (indices into the batch); a finished row leaves the batch, so
    # the steps after it cost nothing for it. Greedy picks do not depend on the other rows.
    rows = torch.arange(B)
    logits, _ = model(idx, attn_mask=attn_mask[:, :L], pos=pos, cache=cache)
    pos = pos[:, -1:]
    for step in range(max_new_tokens):
        nxt = _pick(logits[:, -1, :], temperature, top_k, gen)
        new_tokens[rows, step] = nxt
        if step == max_new_tokens - 1:
            break
        going = nxt != tokenizer.EOS
        if not bool(going.all()):
            if not bool(going.any()):
                break
            kept = going.nonzero().squeeze(1)
            rows, nxt, pos, attn_mask = rows[kept], nxt[kept], pos[kept], attn_mask[kept]
            cache.keep(kept)
        pos = pos + 1
        logits, _ = model(nxt.unsqueeze(1), attn_mask=attn_mask[:, : L + step + 1], pos=pos, cache=cache)
    texts = []
    for row in new_tokens.tolist():
        if tokenizer.EOS in row:
            row = row[: row.index(tokenizer.EOS)]
        texts.append(tokenizer.decode(row))
    return texts


def _pick(logits, temperature, top_k, gen):
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(1)
