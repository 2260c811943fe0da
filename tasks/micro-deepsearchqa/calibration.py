"""What the base model does on training games, greedy and sampled: the figures instructions.md states.

    PYTHONPATH=<dir holding microlm and micro_deepsearchqa> python3 calibration.py [--checkpoint model]

Prints one JSON object: the success rate of greedy play and of play sampled at temperature 1 exactly as
launch_rollouts samples (`launch_rollouts` with episodes 1280, group_size 8, seed 0 plays the same episodes:
microlm.episodes.rollouts_main's choice of games, seeds and batch size), overall and per question type, the share
of groups of 8 episodes with at least one success, and what the episodes do: how often the model opens the document
the question's first hop names, and how often it follows the habit pretraining left at the two decisions (open link
1 first, answer with link 1).
Seeded and single-threaded, so the same checkpoint gives the same figures; tests/test_micro_deepsearchqa.py
recomputes them to check what instructions.md says.
"""

import os

# One thread in every pool, before torch loads: sampled actions then do not depend on the core count.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

from microlm import calibration  # noqa: E402
from microlm.calibration import GROUP_SIZE, SEED, percent  # noqa: E402, F401  (GROUP_SIZE: the tests read it here)
import micro_deepsearchqa  # noqa: E402
from micro_deepsearchqa import QUESTION_TYPES, TYPES, corpus, make_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GREEDY_GAMES = 600
SAMPLED_GAMES = 160


def behaviour(game, record):
    """(opened the first hop's document, opened link 1 first, answered with link 1): the episode replayed."""
    env = make_env()
    env.reset(game["seed"], options=game)
    first_hop = corpus.FACTS[game["subject"]][QUESTION_TYPES[game["type"]][2]]
    actions = [step["action"] for step in record["steps"]]
    opened_first_hop = False
    for action in actions:
        obs, _, _, _ = env.step(action)
        opened_first_hop = opened_first_hop or obs.startswith(f"D: {first_hop}:")
    return opened_first_hop, actions[0] == "search[#1]", "answer[#1]" in actions


def figures(games, records):
    solved = [r["success"] for r in records]
    first_hop, opens_link_1, answers_link_1 = zip(*(behaviour(g, r) for g, r in zip(games, records)))
    return {
        "success": percent(solved),
        "success_by_type": {t: percent([s for g, s in zip(games, solved) if g["type"] == t]) for t in TYPES},
        "opens_the_first_hop": percent(first_hop),
        # The habit pretraining left at both decisions; link 1 is right at both only in birth_region.
        "opens_link_1_first": percent(opens_link_1),
        "answers_with_link_1": percent(answers_link_1),
    }


def calibrate(checkpoint_dir, data_file, greedy_games=GREEDY_GAMES, sampled_games=SAMPLED_GAMES, seed=SEED):
    """The figures as a dict of percentages; the games are seeded samples of data_file."""
    return calibration.calibrate(checkpoint_dir, data_file, micro_deepsearchqa, figures, greedy_games, sampled_games, seed)


if __name__ == "__main__":
    calibration.main(__doc__, HERE, calibrate)
