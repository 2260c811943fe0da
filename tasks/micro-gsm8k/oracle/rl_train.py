"""Reward-only oracle for micro-gsm8k: fine-tuning on the policy's own rewarded completions (expert iteration).

Run in the sandbox as `cd /workspace && python3 code/rl_train.py --out output/round-N` (PYTHONPATH=/workspace/lib)
after launch_rollouts batches have landed in /workspace/rollouts/. Its only material is what
launch_rollouts returns of each episode: the prompt, the sampled completion and its reward
(the records' gold `answer` is never read, nor data/train.jsonl's). It keeps the completions
rewarded 1.0, cut after their final `#### N` as the grader reads them, one copy of each
distinct (prompt, completion), and fine-tunes the base model on all of them, so each round
learns from every batch so far; the next round's rollouts sample from the result. The measure
printed before and after is the share of rewarded prompts whose greedy completion is rewarded
too (it writes one of their rewarded answers).
"""

import glob
import json
import math
import os
import re

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads): the sandbox sizes the pools to
# the job's CPUs, and a model this small gains little from a second thread, which spins and is charged as compute.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import finetune, generate  # noqa: E402
from micro_gsm8k import extract_answer  # noqa: E402

FINAL = re.compile(r"####\s*-?\d+")


def graded_part(completion):
    """The completion up to the end of its last `#### N`, the part the grader reads."""
    return completion[: list(FINAL.finditer(completion))[-1].end()]


def rewarded_pairs(rollout_dir):
    """Distinct (prompt, completion) of every rewarded episode, in file order."""
    pairs = {}
    for path in sorted(glob.glob(os.path.join(rollout_dir, "*.jsonl"))):
        with open(path) as f:
            for line in f:
                episode = json.loads(line)
                if episode["reward"] == 1.0:
                    pairs[(episode["prompt"], graded_part(episode["completion"]))] = None
    return list(pairs)


def reproduces_rewarded(model, pairs):
    """Percentage of rewarded prompts whose greedy answer is one their rewarded completions gave."""
    answers = {}
    for prompt, completion in pairs:
        answers.setdefault(prompt, set()).add(extract_answer(completion))
    prompts = list(answers)
    completions = generate(model, prompts, max_new_tokens=32)
    return 100.0 * sum(extract_answer(c) in answers[p] for p, c in zip(prompts, completions)) / len(prompts)


def main():
    parser = finetune.parser(__doc__, lr=1e-3, warmup=10)
    parser.add_argument("--rollouts", default="/workspace/rollouts", help="folder of launch_rollouts batches")
    parser.add_argument("--epochs", type=float, default=16, help="passes over the rewarded pairs")
    args = finetune.start(parser)
    pairs = rewarded_pairs(args.rollouts)
    # Few pairs in round 1: at least 60 steps; 16 epochs beat 8 (README.md, "Calibration").
    steps = max(60, math.ceil(args.epochs * len(pairs) / args.batch_size))
    print(f"{len(pairs)} rewarded (prompt, completion) pairs; {steps} steps", flush=True)
    finetune.run(args, pairs, lambda model: reproduces_rewarded(model, pairs), "greedy gives a rewarded answer", steps=steps)


if __name__ == "__main__":
    main()
