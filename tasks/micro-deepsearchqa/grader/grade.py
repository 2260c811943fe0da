"""Grade a micro-deepsearchqa checkpoint on the held-out games.

    PYTHONPATH=<dir holding microlm and micro_deepsearchqa> python3 grade.py \\
        --checkpoint DIR --eval-dir DIR --out FILE.json

Plays every game of EVAL_DIR/public.jsonl and EVAL_DIR/private.jsonl once, greedily, with the
checkpoint as the policy (at most 6 steps, 16 new characters an action), single-threaded. Writes
{"grader_version", "public": {"score", "successes", "total", "mean_return", "success_<type>", ...},
"private": {...}}, score = 100 * answered correctly / games. A checkpoint that fails validation
exits with status 2 and the reason on stderr, writing no score.
"""

import os
import sys

# One thread in every pool, set before torch loads: the same weights always get the same score.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm.episodes import grade_main  # noqa: E402
from micro_deepsearchqa import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env  # noqa: E402

GRADER_VERSION = "micro-deepsearchqa-grader-1"


def main():
    grade_main(sys.argv[1:], __doc__, GRADER_VERSION, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)


if __name__ == "__main__":
    main()
