"""Tests of the webshop-human task's grader (WebShop's papers' evaluation) on prepared fixture assets.

    .venv-full/bin/python tasks/webshop-human/tests/test_webshop_human.py

The grader is hflm.webshop.grade with the "webshop-human" variant; tasks/webshop/tests covers what they share. Here:
the variant's env (the whole product set, human goals), its success at reward 1, on a few of its 500 goals.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.dirname(HERE)
TASKS = os.path.dirname(TASK)
STANDINS = os.path.join(TASKS, "hflm", "standins")
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, os.path.join(TASKS, "hflm-tests"))  # for the fixtures
sys.path.append(STANDINS)

import fixture_smoke_webshop  # noqa: E402
from hflm import assets, webshop, webshop_assets  # noqa: E402

GRADER = os.path.join(TASK, "grader", "grade.py")
HOME = HUB = None


def setUpModule():
    global HOME, HUB
    HUB = fixture_smoke_webshop.write(tempfile.mkdtemp(prefix="webshop-hub-"))
    fixture_smoke_webshop.write_tiny_model(HUB)
    HOME = tempfile.mkdtemp(prefix="webshop-home-")
    assets.prepare("webshop-human", HOME, fixture_smoke_webshop.TINY_MODEL, HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


class GraderTest(unittest.TestCase):
    def test_plays_human_goals_and_counts_only_reward_1(self):
        scratch = tempfile.mkdtemp(prefix="webshop-human-grade-")
        self.addCleanup(shutil.rmtree, scratch, True)
        eval_dir = os.path.join(scratch, "eval")
        shutil.copytree(os.path.join(HOME, "assets", "webshop-human", "eval"), eval_dir)
        for half in ("public", "private"):  # four of the 500 goals: the form, not the figure
            with open(os.path.join(eval_dir, f"{half}.jsonl")) as f:
                head = f.readlines()[:2]
            with open(os.path.join(eval_dir, f"{half}.jsonl"), "w") as f:
                f.writelines(head)
        base = os.path.join(HOME, "models", fixture_smoke_webshop.TINY_MODEL.replace("/", "--"))
        done = subprocess.run(
            [sys.executable, GRADER, "--checkpoint", base, "--base", base, "--eval-dir", eval_dir,
             "--out", os.path.join(scratch, "out", "result.json")],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([TASKS, STANDINS])}, capture_output=True, text=True, timeout=900)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(scratch, "out", "result.json")) as f:
            result = json.load(f)
        self.assertEqual((result["grader_version"], result["variant"], result["success_at"]),
                         ("webshop-human-grader-2", "webshop-human", 1.0))
        self.assertEqual((result["public"]["total"], result["private"]["whole_total"]), (2, 4))
        # The tiny model buys one fixed product (where the whole set's search shows it) and never picks options: no
        # human goal's reward can be 1, whatever it bought, yet its partial rewards make a headline above 0.
        self.assertEqual((result["public"]["correct"], result["private"]["correct"], result["private"]["whole_correct"]), (0, 0, 0))
        self.assertGreater(result["private"]["whole_mean_reward"], 0)
        self.assertLessEqual(result["private"]["whole_mean_reward"], 0.75)
        self.assertEqual(result["private"]["environment"], "web_agent_site=stand-in")
        # The headline is the papers' mean reward x 100, the success rate beside it.
        for half in ("public", "private"):
            self.assertAlmostEqual(result[half]["score"], 100 * result[half]["mean_reward"], places=6)
            self.assertEqual(result[half]["success_rate"], 0.0)
        self.assertAlmostEqual(result["private"]["whole_score"], 100 * result["private"]["whole_mean_reward"], places=6)
        self.assertEqual(result["private"]["whole_success_rate"], 0.0)

    def test_headline_is_mean_reward_here_and_success_rate_for_webshop(self):
        episodes = [{"reward": 1.0, "won": True}, {"reward": 0.5, "won": False}, {"reward": 0.25, "won": False},
                    {"reward": 0.0, "won": False}]
        self.assertEqual(webshop.headline(episodes, webshop.VARIANTS["webshop-human"]), 43.75)
        self.assertEqual(webshop.success_rate(episodes)[0], 25.0)
        reference = [dict(e, won=e["reward"] >= 0.5) for e in episodes]
        self.assertEqual(webshop.headline(reference, webshop.VARIANTS["webshop"]), 50.0)
        self.assertEqual(webshop.headline([], webshop.VARIANTS["webshop-human"]), 0.0)

    def test_task_json_names_the_variant(self):
        with open(os.path.join(TASK, "task.json")) as f:
            task = json.load(f)
        self.assertEqual((task["id"], task["defaultModel"], task["standins"]),
                         ("webshop-human", webshop_assets.DEFAULT_MODEL, ["web_agent_site"]))
        self.assertIn("success = reward 1", task["grading"])


if __name__ == "__main__":
    unittest.main()
