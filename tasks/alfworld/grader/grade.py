"""Grade an alfworld submission: the model plays the hidden valid_unseen games as the reference's ReAct agent.

    PYTHONPATH=<dir holding hflm and alfworld> <.venv-full>/bin/python grade.py \\
        --checkpoint DIR --base DIR [--base-id ORG/NAME] --eval-dir DIR --out FILE.json

The checkpoint is a submitted folder: a full Hugging Face model or a PEFT LoRA adapter of the run's base model
(--base). hflm.submission checks it and writes the full model folder graded (an adapter merged) beside --out; a
refused folder exits with status 2 and "invalid checkpoint: [code] message" on stderr, writing no score.
EVAL_DIR holds the two halves of valid_unseen as ALFWorld data folders (public/json_2.1.1/valid_unseen/…,
private/…), their game lists (public.jsonl, private.jsonl) and react_prompts.json. Each half is played through
upstream's AlfredTWEnv (alfworld.agents.environment; the stand-in where the real package is not installed) with
hflm.alfworld's ReAct loop: the reference's two examples per task type, at most 50 steps, greedy text completion
of at most 100 tokens cut at the first newline (vLLM on a GPU, else transformers on one CPU thread). One engine
serves both halves.

Writes {"grader_version", "public": {"score", "correct", "total", "per_type"}, "private": {..., "whole_score",
"whole_correct", "whole_total"}}: score = 100 * games won / games played; per_type = "clean 3/5, put 2/4, ..." (won /
played per task type; a string, as the public half's figures reach the agent through get_score, which takes numbers
and strings). The whole-set figure (all valid_unseen
games, the paper's) is kept with the private half, which the agent never sees.
"""

import json
import os
import sys

from hflm import grading  # first: it pins the thread pools before torch loads
import torch  # after hflm.grading: its thread pins come first
from hflm import alfworld, gpu

GRADER_VERSION = "alfworld-grader-1"


def per_type_text(episodes):
    """The reference's per_task summary in one line: "clean 3/5, put 2/4" (won / played, by prompt key)."""
    return ", ".join(f"{key} {t['won']}/{t['total']}" for key, t in sorted(alfworld.per_type(episodes).items()))


def main(argv=None):
    args = grading.parse(__doc__, "where to write the scores (JSON)", argv)
    model_dir = grading.open_submission(args, "grading")
    if model_dir is None:
        return 2
    with open(os.path.join(args.eval_dir, "react_prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    result = {"grader_version": GRADER_VERSION}
    whole_won = whole_total = 0
    try:
        policy = alfworld.Policy(model_dir)
    except gpu.GpuUnavailable as e:  # given GPUs it cannot use: said, never played on CPU instead
        grading.gpu_failure(f"GPU unavailable: {e}")
    try:
        for split in grading.SPLITS:
            listed = grading.read_split(args.eval_dir, split)
            env, n = alfworld.open_games(os.path.join(args.eval_dir, split), "eval_out_of_distribution")
            if n != len(listed):
                raise ValueError(f"{split}: the env found {n} games, {split}.jsonl lists {len(listed)}: prepare the assets again")
            episodes = alfworld.play(env, n, prompts, policy.complete)
            score, won, total = alfworld.success_rate(episodes)
            result[split] = {"score": score, "correct": won, "total": total, "per_type": per_type_text(episodes)}
            whole_won, whole_total = whole_won + won, whole_total + total
            print(f"{split}: {won}/{total} games won", file=sys.stderr, flush=True)
    except torch.OutOfMemoryError as e:  # said as the other graders say it (hflm.grading.per_split), exit status 3
        grading.gpu_failure(f"out of GPU memory while playing ({e}); grade on a GPU with more memory (serve --gpus), "
                            "or free the GPU of other processes")
    finally:
        policy.close()
    result["private"].update(whole_score=round(100.0 * whole_won / whole_total, 2), whole_correct=whole_won,
                             whole_total=whole_total)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
