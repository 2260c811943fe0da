"""Checks of micro-webshop that run in well under a minute on a CPU.

    /usr/bin/python3 tasks/micro-webshop/tests/test_micro_webshop.py

Builds its own library folder (symlinks microlm and micro_webshop, as the sandbox
mounts them; microlm.testing), so no PYTHONPATH is needed. What every task must do
(grader determinism, baseline and refusals, rollouts, generate.py, oracle replay) is
checked by tasks/contract_test.py.
"""

import os
import random
import sys
import tempfile
import unittest

TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(TASK))  # tasks/, for microlm
from microlm.testing import TaskDir, assert_stated_figures  # noqa: E402

T = TaskDir(TASK)
sys.path.insert(1, TASK)  # expert.py: at the task root, not in the env package the agent sees

import torch  # noqa: E402

from microlm import checkpoint, episodes  # noqa: E402
import micro_webshop as ws  # noqa: E402
from expert import expert, habit_expert, habit_policy  # noqa: E402

BASE = T.base
torch.set_num_threads(1)
load = T.load
TRAIN, PUBLIC, PRIVATE = load("data/train.jsonl"), load("eval/public.jsonl"), load("eval/private.jsonl")


def play_policy(policy, game):
    env = ws.make_env()
    obs, info = env.reset(game["seed"], options=game)
    trace = [(obs, info)]
    for _ in range(ws.MAX_STEPS):
        obs, reward, done, info = env.step(policy(obs))
        trace.append((obs, info))
        if done:
            return info["success"], reward, trace
    return False, 0.0, trace


class Env(unittest.TestCase):
    def test_expert_solves_every_game_with_admissible_actions(self):
        for game in TRAIN + PUBLIC + PRIVATE:
            env = ws.make_env()
            obs, info = env.reset(game["seed"], options=game)
            self.assertEqual(info["task_type"], game["type"])
            for steps in range(1, ws.MAX_STEPS + 1):
                action = expert(obs)
                self.assertIn(action, info["admissible"], obs)
                self.assertLessEqual(len(obs), 160)
                obs, reward, done, info = env.step(action)
                self.assertIn("admissible", info)
                if done:
                    break
            self.assertTrue(done and info["success"] and reward == 1.0, game)
            self.assertEqual(steps, 4)

    def test_habit_demonstrator_succeeds_sometimes_and_its_habit_rarely(self):
        rng = random.Random(0)
        mixed = sum(play_policy(lambda o: habit_expert(o, rng, 0.35), g)[0] for g in TRAIN[:1000]) / 1000
        habit = sum(play_policy(lambda o: habit_expert(o, rng, 0.0), g)[0] for g in TRAIN[:1000]) / 1000
        self.assertTrue(0.2 <= mixed <= 0.4, mixed)
        self.assertTrue(0.03 <= habit <= 0.15, habit)
        for game in TRAIN[:50]:
            obs, _ = ws.make_env().reset(game["seed"], options=game)
            self.assertAlmostEqual(sum(p for _, p in habit_policy(obs, 0.35)), 1.0)

    def test_env_package_exposes_no_expert(self):
        for name in ("expert", "habit_policy", "habit_expert"):
            self.assertFalse(hasattr(ws, name), name)
        for name, text in T.env_sources().items():
            self.assertNotIn("def habit_", text, name)
            self.assertNotIn("expert", text.lower(), name)

    def test_pages_invalid_actions_and_back(self):
        env = ws.make_env()
        obs, info = env.reset(7, options={"seed": 7, "colour": "red", "material": "silk", "type": "coat"})
        self.assertTrue(obs.startswith("red silk coat, size ") and obs.endswith(" | search"), obs)
        self.assertEqual(info["admissible"], ["search[red silk coat]"])
        for bad in ("", "click[1]", "buy", "search[]", "search[red silk coat", "click[buy]"):
            nobs, reward, done, info = env.step(bad)
            self.assertEqual((nobs, reward, done), ("nothing happens. " + obs, 0.0, False))
        results, _, _, info = env.step("search[red silk coat]")
        self.assertIn("red silk coat $", results)
        self.assertEqual(info["admissible"][-1], "click[back]")
        product, _, _, info = env.step("click[1]")
        self.assertNotIn("click[buy]", info["admissible"])
        self.assertEqual(env.step("click[back]")[0], results)
        self.assertEqual(env.step("click[back]")[0], obs)
        self.assertEqual(env.step("search[zebra]")[0], obs.replace(" | search", " | no results"))

    def test_reset_is_deterministic_and_games_vary(self):
        game = TRAIN[0]
        first = play_policy(expert, game)[2]
        self.assertEqual(first, play_policy(expert, game)[2])
        self.assertGreater(len({ws.make_env().reset(g["seed"], options=g)[0] for g in TRAIN[:100]}), 90)

    def test_reward(self):
        goal = {"colour": "red", "material": "cotton", "type": "shirt", "size": "m", "budget": 30}
        p = lambda c, m, t, price: {"colour": c, "material": m, "type": t, "price": price}
        self.assertEqual(ws.purchase_reward(p("red", "cotton", "shirt", 24), "m", goal), 1.0)
        self.assertEqual(ws.purchase_reward(p("red", "cotton", "shirt", 24), "l", goal), 0.45)
        self.assertEqual(ws.purchase_reward(p("red", "cotton", "dress", 24), "m", goal), 0.0)
        self.assertEqual(ws.purchase_reward(p("red", "wool", "shirt", 44), "m", goal), 0.3333)
        self.assertEqual(ws.purchase_reward(p("red", "wool", "shirt", 24), "m", goal), 0.6667)

    def test_eval_products_never_asked_for_in_training(self):
        key = lambda g: (g["colour"], g["material"], g["type"])
        train, public, private = ({key(g) for g in split} for split in (TRAIN, PUBLIC, PRIVATE))
        self.assertFalse(train & public or train & private or public & private)
        self.assertEqual((len(public), len(private), len(PUBLIC), len(PRIVATE)), (12, 12, 150, 150))


class Model(unittest.TestCase):
    def test_greedy_play_is_deterministic(self):
        model = checkpoint.load(BASE)
        games = PUBLIC[:20]
        play = lambda: episodes.play(model, [ws.make_env() for _ in games], games, ws.format_prompt, ws.MAX_STEPS, ws.MAX_NEW_TOKENS)
        first = play()
        self.assertEqual(first, play())
        self.assertTrue(all(r["steps"][0]["action"] == expert(r["steps"][0]["observation"]) for r in first))

    def test_rollouts(self):
        with tempfile.TemporaryDirectory() as d:
            summary, rows = T.rollouts(self, os.path.join(d, "r.jsonl"), n=16, group_size=4)
        self.assertTrue(all(isinstance(r["success"], bool) and r["steps"] for r in rows))
        self.assertAlmostEqual(summary["success_rate"], sum(r["success"] for r in rows) / 16, places=4)


class BaseModelFigures(unittest.TestCase):
    # Figures are stated as whole percentages: half a point of rounding, plus slack for another BLAS build's rounding.
    TOLERANCE = 1.5

    def test_stated_base_model_figures_are_measured(self):
        import calibration

        with open(os.path.join(TASK, "instructions.md")) as f:
            text = f.read()
        self.assertIn(
            f"({calibration.GREEDY_GAMES} seeded games greedy, "
            f"{calibration.SAMPLED_GAMES * calibration.GROUP_SIZE} episodes sampled at temperature 1 as `launch_rollouts` "
            f"samples them: {calibration.SAMPLED_GAMES} games, {calibration.GROUP_SIZE} episodes each;",
            " ".join(text.split()),
        )
        measured = calibration.calibrate(BASE, T.path("data/train.jsonl"))
        g, s = measured["greedy"], measured["sampled"]
        expected = {
            "succeeds": (g["success"], s["success"]),
            **{f"succeeds, {t}": (g["success_by_type"][t], s["success_by_type"][t]) for t in ws.TYPES},
            "searches with the instruction's product words": (g["searches_the_right_query"], s["searches_the_right_query"]),
            "opens result 1 first": (g["opens_result_1"], s["opens_result_1"]),
            "chooses the first size listed": (g["chooses_the_first_size"], s["chooses_the_first_size"]),
            "groups of 8 episodes with at least one success": (None, s["groups_with_a_success"]),
        }
        assert_stated_figures(self, text, expected, self.TOLERANCE)


if __name__ == "__main__":
    unittest.main()
