"""What the base model does on training games, greedy and sampled: the figures instructions.md states.

    PYTHONPATH=<dir holding microlm and micro_alfworld> python3 calibration.py [--checkpoint model]

Prints one JSON object: the success rate of greedy play and of play sampled at temperature 1 exactly as
launch_rollouts samples (`launch_rollouts` with episodes 1280, group_size 8, seed 0 plays the same episodes:
microlm.episodes.rollouts_main's choice of games, seeds and batch size), overall and per task type, the share of
groups of 8 episodes with at least one success, and what the episodes do: how often the model picks up the goal
object and how often it puts it down again at once, where it found it (its habit).
Seeded and single-threaded, so the same checkpoint gives the same figures; tests/test_micro_alfworld.py
recomputes them to check what instructions.md says.
"""

import os

# One thread in every pool, before torch loads: sampled actions then do not depend on the core count.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import calibration  # noqa: E402
from microlm.calibration import GROUP_SIZE, SEED, percent  # noqa: E402, F401  (GROUP_SIZE: the tests read it here)
import micro_alfworld  # noqa: E402
from micro_alfworld import TASK_TYPES, make_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GREEDY_GAMES = 600
SAMPLED_GAMES = 160


def behaviour(game, record):
    """(held the goal object at some point, put it down at once where it took it): the episode replayed in a fresh env."""
    env = make_env()
    env.reset(game["seed"], options=game)
    held = put_at_once = False
    actions = [step["action"] for step in record["steps"]]
    for i, action in enumerate(actions):
        obs, _, _, _ = env.step(action)
        if not held and "holding: nothing" not in obs:
            held, put_at_once = True, actions[i + 1 : i + 2] == ["put"]
    return held, put_at_once


def figures(games, records):
    solved = [r["success"] for r in records]
    held, put_at_once = zip(*(behaviour(g, r) for g, r in zip(games, records)))
    return {
        "success": percent(solved),
        "success_by_type": {t: percent([s for g, s in zip(games, solved) if g["task_type"] == t]) for t in TASK_TYPES},
        "takes_the_goal_object": percent(held),
        # The habit pretraining left: drop the object where it was found, a failure unless that is the destination.
        "puts_it_down_at_once": percent(put_at_once),
    }


def calibrate(checkpoint_dir, data_file, greedy_games=GREEDY_GAMES, sampled_games=SAMPLED_GAMES, seed=SEED):
    """The figures as a dict of percentages; the games are seeded samples of data_file."""
    return calibration.calibrate(checkpoint_dir, data_file, micro_alfworld, figures, greedy_games, sampled_games, seed)


if __name__ == "__main__":
    calibration.main(__doc__, HERE, calibrate)
