"""A small GPT-style decoder-only transformer (pre-LayerNorm, learned positions,
tied input/output embeddings), written out by hand for torch 1.13.

    model = GPT(GPTConfig(n_layer=2, d_model=96, n_head=4, context_len=128))
    logits, loss = model(idx, targets)   # idx, targets: (batch, time) int64

`targets` uses -100 for positions that must not count in the loss
(see `microlm.data`). `attn_mask`, `pos` and `cache` are only needed for
left-padded batches and fast generation; `microlm.decode.generate` uses them.
"""

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .tokenizer import VOCAB_SIZE

IGNORE_INDEX = -100


@dataclass
class GPTConfig:
    """Model shape. Saved as config.json next to the weights."""

    vocab_size: int = VOCAB_SIZE
    context_len: int = 128  # longest sequence (prompt + completion + BOS/EOS) the model sees
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 96  # the MLP hidden size is 4 * d_model

    def to_dict(self):
        return asdict(self)


class KVCache:
    """Keys and values of the positions already processed, written in place by
    `GPT.forward(..., cache=...)`, so that each generation step only runs the new token.

    The buffers hold `capacity` positions (at most the model's context_len) and are filled
    from the front, so a step copies only its own keys and values. `keep(rows)` drops the
    batch rows no longer decoded (finished sequences)."""

    def __init__(self, n_layer, capacity):
        self.keys = [None] * n_layer
        self.values = [None] * n_layer
        self.capacity = capacity
        self.length = 0  # positions cached, the same in every layer

    def extend(self, layer, k, v):
        """Appends (B, heads, T, head_dim) keys and values of `layer`; returns all of them so far."""
        end = self.length + k.size(2)
        if end > self.capacity:
            raise ValueError(f"the cache holds {self.capacity} positions; {end} were asked for")
        if self.keys[layer] is None:
            B, H, _, D = k.shape
            self.keys[layer] = k.new_empty(B, H, self.capacity, D)
            self.values[layer] = v.new_empty(B, H, self.capacity, D)
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def keep(self, rows):
        """Keeps only the batch rows `rows` (a 1-D index tensor), in that order."""
        for layer, keys in enumerate(self.keys):
            if keys is not None:
                self.keys[layer] = keys.index_select(0, rows)
                self.values[layer] = self.values[layer].index_select(0, rows)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.n_head, self.layer = cfg.n_head, layer
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x, mask, cache):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k, v = cache.extend(self.layer, k, v)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        # finfo.min rather than -inf: a fully masked row (a padding query) stays finite.
        att = att.masked_fill(~mask, torch.finfo(att.dtype).min).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg, layer)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model)
        )

    def forward(self, x, mask, cache):
        x = x + self.attn(self.ln1(x), mask, cache)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init_weights)
        # GPT-2 init: shrink the residual projections so deep stacks start near identity.
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, targets=None, attn_mask=None, pos=None, cache=None):
        """Run the model.

        idx:       (B, T) token ids.
        targets:   optional (B, T) next-token ids, IGNORE_INDEX (-100) where no loss is wanted;
                   loss is the mean cross-entropy over the other positions.
        attn_mask: optional (B, S) bool, False at padding; S = T plus the cached length.
        pos:       optional (B, T) position ids (default 0..T-1 after the cached length).
        cache:     optional KVCache; the new keys/values are appended to it.
        Returns (logits (B, T, vocab), loss or None).
        """
        B, T = idx.shape
        past = 0 if cache is None else cache.length
        S = past + T
        if S > self.config.context_len:
            raise ValueError(f"sequence length {S} exceeds context_len {self.config.context_len}")
        if pos is None:
            pos = torch.arange(past, S, device=idx.device).unsqueeze(0)
        # Query t (absolute position past+t) sees keys 0..past+t that are not padding.
        if T == 1:
            mask = torch.ones(1, 1, 1, S, dtype=torch.bool, device=idx.device)  # one new token sees everything before it
        else:
            mask = torch.ones(T, S, dtype=torch.bool, device=idx.device).tril(diagonal=past).view(1, 1, T, S)
        if attn_mask is not None:
            mask = mask & attn_mask.view(B, 1, 1, S)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x, mask, cache)
        if cache is not None:
            cache.length = S
        logits = F.linear(self.ln_f(x), self.tok_emb.weight)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=IGNORE_INDEX
            )
        return logits, loss
