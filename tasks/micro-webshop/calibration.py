"""What the base model does on training games, greedy and sampled: the figures instructions.md states.

    PYTHONPATH=<dir holding microlm and micro_webshop> python3 calibration.py [--checkpoint model]

Prints one JSON object: the success rate of greedy play and of play sampled at temperature 1 exactly as
launch_rollouts samples (`launch_rollouts` with episodes 1280, group_size 8, seed 0 plays the same episodes:
microlm.episodes.rollouts_main's choice of games, seeds and batch size), overall and per product type asked for, the
share of groups of 8 episodes with at least one success, and what the episodes do: how often the model searches with
the instruction's product words, and how often it follows the two habits pretraining left at the purchase's choices
(open result 1, choose the first size listed).
Seeded and single-threaded, so the same checkpoint gives the same figures; tests/test_micro_webshop.py
recomputes them to check what instructions.md says.
"""

import os

# One thread in every pool, before torch loads: sampled actions then do not depend on the core count.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import calibration  # noqa: E402
from microlm.calibration import GROUP_SIZE, SEED, percent  # noqa: E402, F401  (GROUP_SIZE: the tests read it here)
import micro_webshop  # noqa: E402
from micro_webshop import TYPES, make_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GREEDY_GAMES = 600
SAMPLED_GAMES = 160


def behaviour(game, record):
    """(searched the right query, opened result 1 first, chose the first size listed first): the episode replayed."""
    env = make_env()
    env.reset(game["seed"], options=game)
    actions = [step["action"] for step in record["steps"]]
    right_query = actions[0] == f"search[{env.query()}]"
    first_result = first_size = None
    for action in actions:
        page = env.page
        env.step(action)
        if page == "results" and env.page == "product" and first_result is None:
            first_result = action == "click[1]"
        if page == "product" and env.size and first_size is None:
            first_size = env.size == env.product["sizes"][0]
        if env.done:
            break
    return right_query, bool(first_result), bool(first_size)


def figures(games, records):
    solved = [r["success"] for r in records]
    right_query, first_result, first_size = zip(*(behaviour(g, r) for g, r in zip(games, records)))
    return {
        "success": percent(solved),
        "success_by_type": {t: percent([s for g, s in zip(games, solved) if g["type"] == t]) for t in TYPES},
        "searches_the_right_query": percent(right_query),
        # The habits pretraining left at the two choices; the wanted product is rarely result 1.
        "opens_result_1": percent(first_result),
        "chooses_the_first_size": percent(first_size),
    }


def calibrate(checkpoint_dir, data_file, greedy_games=GREEDY_GAMES, sampled_games=SAMPLED_GAMES, seed=SEED):
    """The figures as a dict of percentages; the games are seeded samples of data_file."""
    return calibration.calibrate(checkpoint_dir, data_file, micro_webshop, figures, greedy_games, sampled_games, seed)


if __name__ == "__main__":
    calibration.main(__doc__, HERE, calibrate)
