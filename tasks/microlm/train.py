"""A plain training loop: AdamW on (input, target) batches with a learning-rate schedule.

    from microlm import data, train
    batches = data.batches(pairs, batch_size=16, context_len=model.config.context_len, seed=0)
    train.fit(model, batches, steps=800, lr_at=train.warmup_cosine(2e-3, warmup=30, steps=800))

It prints "step 50/800 loss 0.521 lr 1.98e-03 12s" every log_every steps and at the
end, flushed, so a job's log shows how training goes.
"""

import math
import time

import torch


def warmup_cosine(peak, warmup, steps, floor=0.1):
    """lr(step): linear warmup to peak over `warmup` steps, then cosine decay to floor * peak at `steps`."""

    def lr_at(step):
        progress = max(0.0, (step - warmup) / max(1, steps - warmup))
        return peak * min(1.0, step / max(1, warmup)) * (floor + (1 - floor) / 2 * (1 + math.cos(math.pi * progress)))

    return lr_at


def warmup_constant(peak, warmup):
    """lr(step): linear warmup to peak over `warmup` steps, then constant."""
    return lambda step: peak * min(1.0, step / warmup)


def fit(model, batches, steps, lr_at, log_every=50, loss_fn=None):
    """Trains model in place for `steps` steps (numbered from 1) of `batches`: AdamW
    (betas 0.9/0.99, no weight decay), gradients clipped to norm 1.0, lr_at(step) as the rate.

    loss_fn(model, batch) -> scalar loss; by default a batch is (x, y) and the loss is model(x, y)'s."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr_at(1), betas=(0.9, 0.99), weight_decay=0.0)
    start = time.time()
    for step in range(1, steps + 1):
        lr = lr_at(step)
        for group in opt.param_groups:
            group["lr"] = lr
        batch = next(batches)
        if loss_fn is None:
            x, y = batch
            _, loss = model(x, y)
        else:
            loss = loss_fn(model, batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0 or step == steps:
            print(f"step {step}/{steps} loss {loss.item():.3f} lr {lr:.2e} {time.time() - start:.0f}s", flush=True)
