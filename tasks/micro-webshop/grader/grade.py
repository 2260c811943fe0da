"""Grade a micro-webshop checkpoint on the held-out games.

    PYTHONPATH=<dir holding microlm and micro_webshop> python3 grade.py \\
        --checkpoint DIR --eval-dir DIR --out FILE.json

Plays every game of EVAL_DIR/public.jsonl and EVAL_DIR/private.jsonl once, greedily (microlm.episodes.play,
at most 8 steps and 32 new tokens an action), and writes per split
{"score": 100 * success rate, "successes", "total", "mean_return", "mean_length", "success_<product type>", ...}.
A game is a success when the policy buys with reward >= 0.5 (the wanted product in the wanted size).
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
from micro_webshop import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env  # noqa: E402

GRADER_VERSION = "micro-webshop-grader-1"

if __name__ == "__main__":
    grade_main(sys.argv[1:], __doc__, GRADER_VERSION, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)
