"""Tests of the webshop task's grader on prepared fixture assets (hflm's fixture catalogue, a tiny model).

    .venv-full/bin/python tasks/webshop/tests/test_webshop.py

The grader runs as the server runs it: a fresh .venv-full Python with PYTHONPATH holding hflm and the web_agent_site
stand-in (the server mounts both under lib/).
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
from hflm import assets, webshop_assets  # noqa: E402

GRADER = os.path.join(TASK, "grader", "grade.py")
HOME = HUB = None


def setUpModule():
    """Assets from the fixture catalogue with its tiny model, which buys one fixed product in three steps whatever the
    goal: a model that never buys plays 50 steps of 3k-token prompts per goal, which costs minutes and proves nothing more."""
    global HOME, HUB
    HUB = fixture_smoke_webshop.write(tempfile.mkdtemp(prefix="webshop-hub-"))
    fixture_smoke_webshop.write_tiny_model(HUB)
    HOME = tempfile.mkdtemp(prefix="webshop-home-")
    assets.prepare("webshop", HOME, fixture_smoke_webshop.TINY_MODEL, HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def base_dir():
    return os.path.join(HOME, "models", fixture_smoke_webshop.TINY_MODEL.replace("/", "--"))


def grade(checkpoint, out_dir, eval_dir=None):
    """Runs the grader on checkpoint as the server would; returns the finished process."""
    return subprocess.run(
        [sys.executable, GRADER, "--checkpoint", checkpoint, "--base", base_dir(), "--base-id", fixture_smoke_webshop.TINY_MODEL,
         "--eval-dir", eval_dir or os.path.join(HOME, "assets", "webshop", "eval"), "--out", os.path.join(out_dir, "result.json")],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([TASKS, STANDINS])}, capture_output=True, text=True, timeout=900,
    )


class GraderTest(unittest.TestCase):
    def scratch(self):
        path = tempfile.mkdtemp(prefix="webshop-grade-")
        self.addCleanup(shutil.rmtree, path, True)
        return path

    def test_plays_both_halves_in_the_servers_form_deterministically(self):
        results = []
        for _ in range(2):
            out = self.scratch()
            done = grade(base_dir(), out)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(os.path.join(out, "result.json")) as f:
                results.append(json.load(f))
        result = results[0]
        self.assertEqual(results[1], result)
        self.assertEqual((result["grader_version"], result["variant"], result["success_at"]), ("webshop-grader-1", "webshop", 0.5))
        self.assertEqual((result["public"]["total"], result["private"]["total"], result["private"]["whole_total"]), (50, 50, 100))
        self.assertNotIn("whole_score", result["public"])
        for half in ("public", "private"):
            # The tiny model buys its one wool coat every time: a success only for goals it happens to half-match.
            self.assertEqual(result[half]["bought"], 50)
            self.assertLess(result[half]["score"], 40)
            self.assertEqual(result[half]["score"], 2 * result[half]["correct"])
        self.assertEqual(result["private"]["whole_correct"], result["public"]["correct"] + result["private"]["correct"])

    def test_a_goal_the_env_does_not_have_is_refused(self):
        eval_dir = os.path.join(self.scratch(), "eval")
        shutil.copytree(os.path.join(HOME, "assets", "webshop", "eval"), eval_dir)
        with open(os.path.join(eval_dir, "public.jsonl"), "a") as f:
            f.write(json.dumps({"goal_index": 3, "instruction_text": "i need something else", "asin": "B0"}) + "\n")
        done = grade(base_dir(), self.scratch(), eval_dir)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("public.jsonl: goal 3 is not the env's", done.stderr)

    def test_refuses_pickled_weights_saying_what_to_do(self):
        folder = self.scratch()
        shutil.copy(os.path.join(base_dir(), "config.json"), folder)
        with open(os.path.join(folder, "pytorch_model.bin"), "wb") as f:
            f.write(b"not really a pickle")
        done = grade(folder, self.scratch())
        self.assertEqual(done.returncode, 2)
        self.assertIn("invalid checkpoint: [pickled_weights]", done.stderr)

    def test_default_model_and_stand_in_are_prepares(self):
        with open(os.path.join(TASK, "task.json")) as f:
            task = json.load(f)
        self.assertEqual(task["defaultModel"], webshop_assets.DEFAULT_MODEL)
        self.assertEqual(task["standins"], ["web_agent_site"])
        self.assertTrue(os.path.isfile(os.path.join(STANDINS, "web_agent_site", "envs", "web_agent_text_env.py")))


if __name__ == "__main__":
    unittest.main()
