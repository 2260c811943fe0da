"""Tests of the deepsearchqa task's grader entry on prepared fixture assets (hflm's fixture: the csv, a tiny model).

    .venv-full/bin/python tasks/deepsearchqa/tests/test_deepsearchqa.py

The server runs the grader in a fresh .venv-full Python with PYTHONPATH holding hflm and a2rl_search (it mounts both
under lib/). Its searches go through a grading's channel, which only the server opens: the whole grading, searches
and judge included, is played that way by test/redteam/deepsearchqa-eval-questions.test.ts; here, what the entry
refuses before it searches, its main run in this process with a2rl_search on sys.path.
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.dirname(HERE)
TASKS = os.path.dirname(TASK)
CLIENT = os.path.join(os.path.dirname(TASKS), "src", "search", "client")
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, os.path.join(TASKS, "hflm-tests"))  # for the fixtures
sys.path.insert(0, CLIENT)  # a2rl_search, which the server mounts beside hflm

import fixture_grader  # noqa: E402
import fixture_smoke_deepsearchqa  # noqa: E402
from hflm import assets, deepsearchqa_assets  # noqa: E402

GRADER = os.path.join(TASK, "grader", "play.py")
HOME = HUB = MODEL = None


def setUpModule():
    global HOME, HUB, MODEL
    HUB = fixture_smoke_deepsearchqa.write(tempfile.mkdtemp(prefix="deepsearchqa-hub-"), "default")
    MODEL = fixture_smoke_deepsearchqa.write_tiny_model(HUB)
    HOME = tempfile.mkdtemp(prefix="deepsearchqa-home-")
    assets.prepare("deepsearchqa", HOME, MODEL, HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def grade(checkpoint, out_dir, socket=None):
    """(exit status, stderr) of the grader entry run in this process (fixture_grader): each run here stops before a
    score, refused or failed."""
    base = os.path.join(HOME, "models", MODEL.replace("/", "--"))
    argv = ["--checkpoint", checkpoint, "--base", base, "--base-id", MODEL,
            "--eval-dir", os.path.join(HOME, "assets", "deepsearchqa", "eval"), "--out", os.path.join(out_dir, "items.jsonl")]
    return fixture_grader.run_main(GRADER, argv, environ={"A2RL_SEARCH_SOCKET": socket})


class GraderTest(unittest.TestCase):
    def scratch(self):
        path = tempfile.mkdtemp(prefix="deepsearchqa-grade-")
        self.addCleanup(shutil.rmtree, path, True)
        return path

    def test_refuses_to_grade_without_a_search_channel(self):
        out = self.scratch()
        status, stderr = grade(os.path.join(HOME, "models", MODEL.replace("/", "--")), out)
        self.assertNotEqual(status, 0)
        self.assertIn("no search channel (A2RL_SEARCH_SOCKET is unset)", stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "items.jsonl")))

    def test_a_failed_search_fails_the_grading_rather_than_scoring(self):
        out = self.scratch()
        status, stderr = grade(os.path.join(HOME, "models", MODEL.replace("/", "--")), out, socket=os.path.join(out, "no.sock"))
        self.assertNotEqual(status, 0)
        self.assertIn("SearchError: The search channel at", stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "items.jsonl")))

    def test_refuses_pickled_weights_saying_what_to_do(self):
        folder = self.scratch()
        shutil.copy(os.path.join(HOME, "models", MODEL.replace("/", "--"), "config.json"), folder)
        with open(os.path.join(folder, "pytorch_model.bin"), "wb") as f:
            f.write(b"not really a pickle")
        status, stderr = grade(folder, self.scratch(), socket="/nonexistent/search.sock")
        self.assertEqual(status, 2)
        self.assertIn("invalid checkpoint: [pickled_weights]", stderr)

    def test_task_file_matches_prepare_and_the_reference(self):
        with open(os.path.join(TASK, "task.json")) as f:
            task = json.load(f)
        self.assertEqual(task["defaultModel"], deepsearchqa_assets.DEFAULT_MODEL)
        self.assertEqual((task["grader"]["kind"], task["grader"]["entry"], task["grader"]["search"]), ("answers", "play.py", True))
        self.assertIn("searches=", task["defaultBudget"])


if __name__ == "__main__":
    unittest.main()
