"""Reward-only oracle for micro-alpacaeval: expert iteration on the policy's own samples, scored by the brief's rubric.

Run in the sandbox as `cd /workspace && python3 code/rl_train.py` (PYTHONPATH=/workspace/lib).
Each round samples every training instruction at temperature 1 from the current model,
scores each response with the rubric the brief states (10 x the share of constraints
obeyed, by the public micro_alpacaeval.constraints, plus the five quality checks, the
share of real words by micro_alpacaeval.lexicon), keeps the responses with full marks (every
constraint obeyed, every quality check passed in full), adds them to the pool of earlier
rounds (one copy of each distinct (prompt, response)), and fine-tunes the current model on
the pool (loss on the response and its EOS). Such a response ties with a reference that obeys
everything and beats one that does not: the judge's reward would be 0.5 or 1. Sampling here
costs compute, not rollout episodes, and finds thousands of them, where judged rollouts
within the episode budget find a few hundred wins. Keeping responses of lower quality too
(a share of real words down to 45%) keeps more of them, so each round trains longer, for
about the same gain (the task's README has the figures). The references in data/train.jsonl
are never read: only the instructions and their constraints. Printed before and after each round: the share of held-out training
instructions whose greedy response gets full marks.
"""

import math
import os
import re

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): idle threads spinning are charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import checkpoint, data, finetune, generate  # noqa: E402  (after the thread settings above)
from microlm.train import fit, warmup_cosine  # noqa: E402
from micro_alpacaeval import constraints, format_completion, format_prompt  # noqa: E402
from micro_alpacaeval.constraints import words  # noqa: E402
from micro_alpacaeval.lexicon import known_fraction  # noqa: E402

CLEAN = re.compile(r"[A-Za-z0-9 \n.,!?'\-:;\"]*")


def quality(instruction, text):
    """The brief's five quality checks, averaged (each 0 or 1 but the share of real words)."""
    found = [w.lower() for w in words(text)]
    lines = [line.strip().lower() for line in text.split("\n") if line.strip()]
    grams = [tuple(found[i : i + 4]) for i in range(len(found) - 3)]
    checks = (
        text.rstrip()[-1:] in (".", "!", "?"),
        len(set(lines)) == len(lines) and len(set(grams)) == len(grams),
        min(1.0, known_fraction(text, extra=words(instruction)) / 0.9),
        3 <= len(found) <= 60 and len(text) <= 400,
        CLEAN.fullmatch(text) is not None,
    )
    return sum(float(c) for c in checks) / len(checks)


def full_marks(item, text):
    return bool(words(text)) and not constraints.failed(item["constraints"], text) and quality(item["instruction"], text) == 1.0


def greedy_full_marks(model, items):
    responses = generate(model, [format_prompt(it["instruction"]) for it in items], max_new_tokens=128)
    return 100.0 * sum(full_marks(it, r) for it, r in zip(items, responses)) / len(items)


def main():
    parser = finetune.parser(__doc__, lr=1e-3, warmup=10, batch_size=16)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--samples", type=int, default=2, help="responses sampled per training instruction and round")
    parser.add_argument("--epochs", type=float, default=2, help="passes over the pool per round")
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
            raise SystemExit("no sample gets full marks: nothing to learn from")
        steps = max(60, math.ceil(args.epochs * len(pool) / args.batch_size))
        print(f"round {r}: {len(kept)} of {len(items)} samples get full marks; pool {len(pool)}; {steps} steps", flush=True)
        batches = data.batches(list(pool), args.batch_size, model.config.context_len, seed=args.seed + r)
        fit(model, batches, steps, warmup_cosine(args.lr, args.warmup, steps), log_every=100)
        print(f"round {r}: held-out full marks {greedy_full_marks(model, held_out):.1f}%", flush=True)
        checkpoint.save(model, args.out)  # after every round, in case the compute budget runs out
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
