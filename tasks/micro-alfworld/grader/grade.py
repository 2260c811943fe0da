"""Grade a micro-alfworld checkpoint on the held-out games.

    PYTHONPATH=<dir holding microlm and micro_alfworld> python3 grade.py \\
        --checkpoint DIR --eval-dir DIR --out FILE.json

Plays every game of EVAL_DIR/public.jsonl and EVAL_DIR/private.jsonl once, greedily (microlm.episodes.play,
at most 50 steps and 16 new tokens an action), and writes per split
{"score": 100 * success rate, "successes", "total", "mean_return", "mean_length", "success_<task type>", ...}.
Deterministic: greedy decoding, one thread. A checkpoint that fails validation exits with status 2 and the
reason on stderr, writing no score.
"""

import os
import sys

# One thread in every pool (torch's and OpenBLAS's, which is sized when torch loads):
# results then do not depend on the machine's core count, bit for bit.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm.episodes import grade_main  # noqa: E402  (after the thread settings above)
from micro_alfworld import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env  # noqa: E402

GRADER_VERSION = "micro-alfworld-grader-1"

if __name__ == "__main__":
    grade_main(sys.argv[1:], __doc__, GRADER_VERSION, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)
