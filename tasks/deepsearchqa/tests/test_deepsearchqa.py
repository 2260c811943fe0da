"""Tests of the deepsearchqa task's grader entry on prepared fixture assets (hflm's fixture: the csv, a tiny model).

    .venv-full/bin/python tasks/deepsearchqa/tests/test_deepsearchqa.py

The grader runs as the server runs it: a fresh .venv-full Python with PYTHONPATH holding hflm and a2rl_search (the
server mounts both under lib/). Its searches go through a grading's channel, which only the server opens: the
whole grading, searches and judge included, is played by test/redteam/deepsearchqa-eval-questions.test.ts; here,
what the entry refuses before it searches.
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
CLIENT = os.path.join(os.path.dirname(TASKS), "src", "search", "client")
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, os.path.join(TASKS, "hflm", "tests"))  # for the fixtures

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
    env = {k: v for k, v in os.environ.items() if k != "A2RL_SEARCH_SOCKET"}
    env["PYTHONPATH"] = os.pathsep.join([TASKS, CLIENT])
    if socket:
        env["A2RL_SEARCH_SOCKET"] = socket
    base = os.path.join(HOME, "models", MODEL.replace("/", "--"))
    return subprocess.run(
        [sys.executable, GRADER, "--checkpoint", checkpoint, "--base", base, "--base-id", MODEL,
         "--eval-dir", os.path.join(HOME, "assets", "deepsearchqa", "eval"), "--out", os.path.join(out_dir, "items.jsonl")],
        env=env, capture_output=True, text=True, timeout=600,
    )


class GraderTest(unittest.TestCase):
    def scratch(self):
        path = tempfile.mkdtemp(prefix="deepsearchqa-grade-")
        self.addCleanup(shutil.rmtree, path, True)
        return path

    def test_refuses_to_grade_without_a_search_channel(self):
        out = self.scratch()
        done = grade(os.path.join(HOME, "models", MODEL.replace("/", "--")), out)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no search channel (A2RL_SEARCH_SOCKET is unset)", done.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "items.jsonl")))

    def test_a_failed_search_fails_the_grading_rather_than_scoring(self):
        out = self.scratch()
        done = grade(os.path.join(HOME, "models", MODEL.replace("/", "--")), out, socket=os.path.join(out, "no.sock"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("SearchError: The search channel at", done.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "items.jsonl")))

    def test_refuses_pickled_weights_saying_what_to_do(self):
        folder = self.scratch()
        shutil.copy(os.path.join(HOME, "models", MODEL.replace("/", "--"), "config.json"), folder)
        with open(os.path.join(folder, "pytorch_model.bin"), "wb") as f:
            f.write(b"not really a pickle")
        done = grade(folder, self.scratch(), socket="/nonexistent/search.sock")
        self.assertEqual(done.returncode, 2)
        self.assertIn("invalid checkpoint: [pickled_weights]", done.stderr)

    def test_task_file_matches_prepare_and_the_reference(self):
        with open(os.path.join(TASK, "task.json")) as f:
            task = json.load(f)
        self.assertEqual(task["defaultModel"], deepsearchqa_assets.DEFAULT_MODEL)
        self.assertEqual((task["grader"]["kind"], task["grader"]["entry"], task["grader"]["search"]), ("answers", "play.py", True))
        self.assertIn("searches=", task["defaultBudget"])


if __name__ == "__main__":
    unittest.main()
