"""Reward-only oracle for micro-humaneval: fine-tuning on the policy's own rewarded completions (expert iteration).

Run in the sandbox as `cd /workspace && python3 code/rl_train.py --out output/round-N` (PYTHONPATH=/workspace/lib)
after launch_rollouts batches have landed in /workspace/rollouts/. Its only material is what
launch_rollouts returns: each episode's prompt, sampled completion and reward. It keeps the
completions that passed every test (reward 1.0), cut to the graded body as the grader cuts
it, one copy of each distinct (prompt, body), and fine-tunes the base model on all of them
(loss on the body and its EOS), so each round learns from every batch so far; the next
round's rollouts sample from the result. Canonical solutions and the training tests are
never read. The measure printed before and after is the share of rewarded prompts whose
greedy completion is one of their rewarded bodies.
"""

import glob
import json
import math
import os

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): the sandbox sizes the pools to
# the job's CPUs, and a model this small gains little from a second thread, which spins and is charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import finetune, generate  # noqa: E402
from micro_humaneval import truncate_completion  # noqa: E402


def rewarded_pairs(rollout_dir):
    """Distinct (prompt, body + newline) of every episode that passed all its tests, in file order."""
    pairs = {}
    for path in sorted(glob.glob(os.path.join(rollout_dir, "*.jsonl"))):
        with open(path) as f:
            for line in f:
                episode = json.loads(line)
                if episode["reward"] == 1.0:
                    body = truncate_completion(episode["completion"]).rstrip() + "\n"
                    pairs[(episode["prompt"], body)] = None
    return list(pairs)


def reproduces_rewarded(model, pairs):
    """Percentage of rewarded prompts whose greedy completion is one of their rewarded bodies."""
    bodies = {}
    for prompt, body in pairs:
        bodies.setdefault(prompt, set()).add(body)
    prompts = list(bodies)
    completions = generate(model, prompts, max_new_tokens=64)
    hits = sum(truncate_completion(c).rstrip() + "\n" in bodies[p] for p, c in zip(prompts, completions))
    return 100.0 * hits / len(prompts)


def main():
    parser = finetune.parser(__doc__, lr=1e-3, warmup=5)
    parser.add_argument("--rollouts", default="/workspace/rollouts", help="folder of launch_rollouts batches")
    parser.add_argument("--epochs", type=float, default=16, help="passes over the rewarded pairs")
    args = finetune.start(parser)
    pairs = rewarded_pairs(args.rollouts)
    # Few pairs early on: at least 60 steps; many epochs, since fewer underfit what the rewards found.
    steps = max(60, math.ceil(args.epochs * len(pairs) / args.batch_size))
    print(f"{len(pairs)} rewarded (prompt, body) pairs; {steps} steps", flush=True)
    finetune.run(args, pairs, lambda model: reproduces_rewarded(model, pairs), "greedy reproduces a rewarded body", steps=steps)


if __name__ == "__main__":
    main()
