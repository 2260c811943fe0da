"""Play episodes of training games with a checkpoint as the policy.

    python3 -m micro_alfworld.rollouts --checkpoint DIR --data /workspace/data/train.jsonl \\
        --n 256 [--group-size 8] [--temperature 1.0] [--top-k K] [--seed 0] [--max-new-tokens 16] --out FILE.jsonl

Picks n / group-size distinct games at random (seeded) and plays group-size episodes of each, all in
lockstep (microlm.episodes.play). Writes one JSON line per episode:
    {"game_index", "seed", "task_type", "steps": [{"observation", "action", "reward", "done"}], "return", "success", "length"}
and prints a JSON summary {"episodes", "mean_return", "success_rate", "out"} on stdout.
Torch runs one thread unless --threads says otherwise.
"""

import sys

from microlm.episodes import rollouts_main

from . import MAX_NEW_TOKENS, MAX_STEPS, format_prompt, make_env


def main(argv=None):
    return rollouts_main(argv, "python3 -m micro_alfworld.rollouts", __doc__, make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS)


if __name__ == "__main__":
    main(sys.argv[1:])
