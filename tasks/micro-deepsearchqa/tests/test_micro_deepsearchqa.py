"""Checks of micro-deepsearchqa that run in well under a minute on a CPU.

    /usr/bin/python3 tasks/micro-deepsearchqa/tests/test_micro_deepsearchqa.py

Builds its own library folder (symlinks microlm and micro_deepsearchqa, as the sandbox
mounts them; microlm.testing), so no PYTHONPATH is needed. What every task must do
(grader determinism, baseline and refusals, rollouts, generate.py, oracle replay) is
checked by tasks/contract_test.py.
"""

import os
import sys
import tempfile
import unittest

TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(TASK))  # tasks/, for microlm
from microlm.testing import TaskDir, assert_stated_figures  # noqa: E402

T = TaskDir(TASK)
sys.path.insert(1, TASK)  # expert.py: task root only, not in the sandbox-mounted env package

import micro_deepsearchqa as pkg  # noqa: E402
from micro_deepsearchqa import MAX_STEPS, corpus, make_env  # noqa: E402
from expert import critical, expert  # noqa: E402

load = T.load


def play(game, policy):
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)
    trace = [(obs, info)]
    for _ in range(MAX_STEPS):
        obs, reward, done, info = env.step(policy(obs))
        trace.append((obs, info))
        if done:
            return reward, info, trace
    return 0.0, info, trace


class Env(unittest.TestCase):
    def test_env_package_does_not_expose_an_expert(self):
        self.assertFalse(hasattr(pkg, "expert"))
        self.assertFalse(hasattr(pkg.game, "expert"))
        self.assertFalse(hasattr(pkg.game, "critical"))
        self.assertNotIn("expert", pkg.__all__)
        for name, text in T.env_sources().items():
            self.assertNotIn("expert", text.lower(), name)

    def test_expert_solves_every_game_in_two_steps(self):
        for rel in ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl"):
            for game in load(rel):
                reward, info, trace = play(game, expert)
                self.assertEqual(reward, 1.0, (rel, game))
                self.assertTrue(info["success"])
                self.assertEqual(len(trace), 3)
                for obs, info in trace:
                    self.assertLessEqual(len(obs), pkg.game.MAX_OBS_CHARS)
                    self.assertIn("admissible", info)

    def test_habit_rarely_solves(self):
        games = load("eval/public.jsonl")
        habit = lambda obs: critical(obs) or "search[#1]"
        solved = sum(play(g, habit)[0] for g in games)
        self.assertTrue(0.03 * len(games) <= solved <= 0.2 * len(games), solved)

    def test_actions_and_bad_input(self):
        game = load("data/train.jsonl")[0]
        env = make_env()
        obs, info = env.reset(game["seed"], options=game)
        self.assertEqual(info["task_type"], game["type"])
        question = obs.split("\n")[-1]
        self.assertTrue(question.startswith("Q: ") and game["subject"] in question)
        self.assertTrue(obs.startswith(f"R: {game['subject']}: "))
        self.assertIn("search[#1]", info["admissible"])
        for bad in ("", "jump", "search[#99]", "answer[#0]", "\u00e9"):
            obs2, reward, done, info = env.step(bad)
            self.assertFalse(done)
            self.assertEqual(reward, 0.0)
            self.assertIn("Nothing happens.", obs2)
            self.assertTrue(obs2.endswith("\n" + question))
        env = make_env()
        env.reset(game["seed"], options=game)
        obs, _, done, _ = env.step(f"search[{game['subject']}]")
        self.assertIn(f"R: {game['subject']}: ", obs)
        answer = pkg.answer_of(game["type"], game["subject"])
        _, reward, done, info = env.step(f"answer[ {answer.upper()}. ]")
        self.assertTrue(done and info["success"] and reward == 1.0)
        env.reset(game["seed"], options=game)
        for i in range(MAX_STEPS):
            _, _, done, info = env.step("search[#1]")
        self.assertTrue(done)
        self.assertFalse(info["success"])

    def test_reset_is_deterministic_and_seed_only_games_work(self):
        a, b = make_env(), make_env()
        self.assertEqual(a.reset(12345), b.reset(12345))
        self.assertIn(a.task_type, pkg.TYPES)

    def test_search_ranks_the_named_entity_first(self):
        for name in corpus.PEOPLE[:50] + corpus.COMPANIES[:50]:
            self.assertEqual(corpus.search(f"Where is {name}?")[0], name)

    def test_evaluation_is_out_of_distribution(self):
        subjects = {rel: {g["subject"] for g in load(rel)} for rel in ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl")}
        self.assertFalse(subjects["data/train.jsonl"] & (subjects["eval/public.jsonl"] | subjects["eval/private.jsonl"]))
        self.assertFalse(subjects["eval/public.jsonl"] & subjects["eval/private.jsonl"])


class Model(unittest.TestCase):
    def test_rollouts_act_in_the_action_format(self):
        with tempfile.TemporaryDirectory() as d:
            _, rows = T.rollouts(self, os.path.join(d, "r.jsonl"), n=32, group_size=4)
        self.assertEqual(len({r["game_index"] for r in rows}), 8)
        for r in rows:
            self.assertTrue(r["steps"] and isinstance(r["success"], bool))
            self.assertTrue(all(s["action"].startswith(("search[", "answer[")) for s in r["steps"]), r)


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
        measured = calibration.calibrate(T.base, T.path("data/train.jsonl"))
        g, s = measured["greedy"], measured["sampled"]
        expected = {
            "succeeds": (g["success"], s["success"]),
            **{f"succeeds, {t}": (g["success_by_type"][t], s["success_by_type"][t]) for t in pkg.TYPES},
            "opens the document the question's first hop names": (g["opens_the_first_hop"], s["opens_the_first_hop"]),
            "opens link 1 first": (g["opens_link_1_first"], s["opens_link_1_first"]),
            "answers with link 1": (g["answers_with_link_1"], s["answers_with_link_1"]),
            "groups of 8 episodes with at least one success": (None, s["groups_with_a_success"]),
        }
        assert_stated_figures(self, text, expected, self.TOLERANCE)


if __name__ == "__main__":
    unittest.main()
