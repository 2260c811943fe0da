"""Reward-only oracle for micro-alpacaeval: expert iteration on the policy's own samples, scored by the public checkers.

Run in the sandbox as `cd /workspace && python3 code/rl_train.py` (PYTHONPATH=/workspace/lib).
Each round samples every training instruction at temperature 1 from the current model,
keeps the responses that obey every constraint (micro_alpacaeval.constraints) and
pass the brief's quality checks but the share of real words, adds them
to the pool of earlier rounds, one copy of each distinct (prompt, response), and
fine-tunes the current model on the pool (loss on the response and its EOS). The base
model's responses win under the judge only when they obey everything, and that is rare
(a few per cent of samples), so sampling here costs compute, not rollout episodes, and
finds thousands of them. The references in data/train.jsonl are never read: only the
instructions and their constraints. The measure printed before and after each round is
the share of held-out training instructions whose greedy response gets full marks.
"""

import os
import re

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): idle threads spinning are charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import checkpoint, data, finetune, generate  # noqa: E402  (after the thread settings above)
from microlm.train import fit, warmup_cosine  # noqa: E402
from micro_alpacaeval import constraints, format_completion, format_prompt  # noqa: E402
from micro_alpacaeval.constraints import words  # noqa: E402

CLEAN = re.compile(r"[A-Za-z0-9 \n.,!?'\-:;\"]*")


def full_marks(item, text):
    """Every constraint obeyed and the quality checks of the brief passed, but the share of real words.

    That share is about 30% in the base model's samples, so requiring it would keep nothing."""
    found = [w.lower() for w in words(text)]
    lines = [line.strip().lower() for line in text.split("\n") if line.strip()]
    grams = [tuple(found[i : i + 4]) for i in range(len(found) - 3)]
    return (
        not constraints.failed(item["constraints"], text)
        and text.rstrip()[-1:] in (".", "!", "?")
        and len(set(lines)) == len(lines)
        and len(set(grams)) == len(grams)
        and 3 <= len(found) <= 60
        and len(text) <= 400
        and CLEAN.fullmatch(text) is not None
    )


def greedy_full_marks(model, items):
    responses = generate(model, [format_prompt(it["instruction"]) for it in items], max_new_tokens=128)
    return 100.0 * sum(full_marks(it, r) for it, r in zip(items, responses)) / len(items)


def main():
    parser = finetune.parser(__doc__, steps=500, lr=1e-3, warmup=20, batch_size=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=2, help="responses sampled per training instruction and round")
    parser.add_argument("--holdout", type=int, default=200, help="training instructions kept aside to measure")
    args = finetune.start(parser)
    held_out, train = finetune.holdout(data.read_jsonl(args.data), args.holdout, args.seed)
    model = checkpoint.load(args.start)
    print(f"start: held-out full marks {greedy_full_marks(model, held_out):.1f}%", flush=True)
    pool = {}
    for r in range(1, args.rounds + 1):
        items = [it for it in train for _ in range(args.samples)]
        responses = generate(model, [format_prompt(it["instruction"]) for it in items], max_new_tokens=128, temperature=1.0, seed=args.seed + r)
        kept = [(format_prompt(it["instruction"]), format_completion(t)) for it, t in zip(items, responses) if full_marks(it, t)]
        pool.update(dict.fromkeys(kept))
        if not pool:
            raise SystemExit("no sample obeys its constraints: nothing to learn from")
        print(f"round {r}: {len(kept)} of {len(items)} samples get full marks; pool {len(pool)}", flush=True)
        batches = data.batches(list(pool), args.batch_size, model.config.context_len, seed=args.seed + r)
        fit(model, batches, args.steps, warmup_cosine(args.lr, args.warmup, args.steps), log_every=100)
        print(f"round {r}: held-out full marks {greedy_full_marks(model, held_out):.1f}%", flush=True)
        checkpoint.save(model, args.out)  # after every round, in case the compute budget runs out
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
