"""Tests of the alfworld task's grader on prepared fixture assets (hflm's fixture hub: stand-in games, tiny model).

    .venv-full/bin/python tasks/alfworld/tests/test_alfworld.py

The grader runs as the server runs it: a fresh .venv-full Python with PYTHONPATH holding hflm and the alfworld
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
sys.path.insert(0, os.path.join(TASKS, "hflm", "tests"))  # for the fixtures
sys.path.append(STANDINS)

import fixture_hub  # noqa: E402
import fixture_smoke_alfworld  # noqa: E402
from hflm import alfworld_assets, assets  # noqa: E402

GRADER = os.path.join(TASK, "grader", "grade.py")
HOME = HUB = MODEL = None


def setUpModule():
    """Assets from the default fixture with its tiny alfworld model, which answers every step with "look" and a
    newline: a random model writes its 100 tokens at each of the 50 steps of every game, which costs minutes and
    proves nothing more."""
    global HOME, HUB, MODEL
    HUB = fixture_hub.write(tempfile.mkdtemp(prefix="alfworld-hub-"))
    MODEL = fixture_smoke_alfworld.write_tiny_model(HUB)
    HOME = tempfile.mkdtemp(prefix="alfworld-home-")
    assets.prepare("alfworld", HOME, MODEL, HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def base_dir():
    return os.path.join(HOME, "models", MODEL.replace("/", "--"))


def grade(checkpoint, out_dir):
    """Runs the grader on checkpoint as the server would; returns the finished process."""
    return subprocess.run(
        [sys.executable, GRADER, "--checkpoint", checkpoint, "--base", base_dir(), "--base-id", MODEL,
         "--eval-dir", os.path.join(HOME, "assets", "alfworld", "eval"), "--out", os.path.join(out_dir, "result.json")],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([TASKS, STANDINS])}, capture_output=True, text=True, timeout=900,
    )


class GraderTest(unittest.TestCase):
    def scratch(self):
        path = tempfile.mkdtemp(prefix="alfworld-grade-")
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
        self.assertEqual(result["grader_version"], "alfworld-grader-1")
        self.assertEqual((result["public"]["total"], result["private"]["total"], result["private"]["whole_total"]), (2, 2, 4))
        self.assertNotIn("whole_score", result["public"])
        for half in ("public", "private"):
            self.assertEqual(result[half]["score"], 0.0)  # "look" wins nothing
            per_type = [part.rsplit(" ", 1)[1].split("/") for part in result[half]["per_type"].split(", ")]
            self.assertEqual(sum(int(total) for won, total in per_type), 2)
            self.assertTrue(all(won == "0" for won, total in per_type))

    def test_refuses_pickled_weights_saying_what_to_do(self):
        folder = self.scratch()
        shutil.copy(os.path.join(base_dir(), "config.json"), folder)
        with open(os.path.join(folder, "pytorch_model.bin"), "wb") as f:
            f.write(b"not really a pickle")
        done = grade(folder, self.scratch())
        self.assertEqual(done.returncode, 2)
        self.assertIn("invalid checkpoint: [pickled_weights]", done.stderr)

    def test_default_model_is_what_prepare_builds(self):
        with open(os.path.join(TASK, "task.json")) as f:
            task = json.load(f)
        self.assertEqual(task["defaultModel"], alfworld_assets.DEFAULT_MODEL)
        self.assertEqual(task["standins"], ["alfworld"])
        self.assertTrue(os.path.isdir(os.path.join(STANDINS, "alfworld", "agents", "environment")))


if __name__ == "__main__":
    unittest.main()
