"""Play episodes of training games with a checkpoint as the policy and record them.

    python3 -m micro_deepsearchqa.rollouts --checkpoint DIR --data /workspace/data/train.jsonl \\
        --n 512 [--group-size 8] [--temperature 1.0] [--top-k K] [--seed 0] --out FILE.jsonl

Plays n episodes over n / group-size distinct training games (group-size episodes each), at most
6 steps, writing one JSON line per episode:
    {"game_index", "seed", "task_type", "steps": [{"observation", "action", "reward", "done"}], "return", "success", "length"}
and prints a JSON summary {"episodes", "mean_return", "success_rate", "out"} on stdout.
"""

import sys

from microlm.episodes import rollouts_main

from . import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env


def main(argv=None):
    rollouts_main(argv, "python3 -m micro_deepsearchqa.rollouts", __doc__, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)


if __name__ == "__main__":
    main(sys.argv[1:])
