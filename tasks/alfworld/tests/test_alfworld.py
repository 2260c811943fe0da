"""Tests of the alfworld task's grader and rollouts on ALFWorld's own game files, prepared as a run's assets.

    .venv-full/bin/python tasks/alfworld/tests/test_alfworld.py

The snapshot `prepare` reads holds games in the layout and format alfworld-download writes (fixtures/alfworld:
json_2.1.1/{train,valid_unseen}/<task>/<trial>/{traj_data.json, game.tw-pddl}, a PDDL problem each), ReAct's
prompt file and a tiny model (hflm's fixture: fixture_smoke_alfworld). The grader and the rollouts sampler run as
the server runs them: a fresh .venv-full Python with PYTHONPATH holding hflm and the alfworld stand-in (the server
mounts both under lib/), which plays the games from their PDDL problem.
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

import fixture_smoke_alfworld  # noqa: E402
from hflm import alfworld_assets, assets  # noqa: E402

GRADER = os.path.join(TASK, "grader", "grade.py")
GAME_FILES = os.path.join(HERE, "fixtures", fixture_smoke_alfworld.DATA)  # alfworld-download's layout
HOME = HUB = MODEL = None


def setUpModule():
    """A snapshot of ALFWorld's game files (fixtures/alfworld), the fixture's prompt file and its tiny alfworld model,
    which answers every step with "look" and a newline (a random model writes its 100 tokens at each of the 50 steps
    of every game, which costs minutes and proves nothing more), prepared as `a2rl prepare alfworld --from` does."""
    global HOME, HUB, MODEL
    HUB = fixture_smoke_alfworld.write(tempfile.mkdtemp(prefix="alfworld-hub-"))
    MODEL = fixture_smoke_alfworld.write_tiny_model(HUB)
    shutil.rmtree(os.path.join(HUB, fixture_smoke_alfworld.DATA))
    shutil.copytree(GAME_FILES, os.path.join(HUB, fixture_smoke_alfworld.DATA))
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
        # valid_unseen's two games, one a half: the look task and the cool task (their prompt keys)
        self.assertEqual((result["public"]["total"], result["private"]["total"], result["private"]["whole_total"]), (1, 1, 2))
        self.assertNotIn("whole_score", result["public"])
        self.assertEqual(sorted([result["public"]["per_type"], result["private"]["per_type"]]), ["cool 0/1", "examine 0/1"])
        self.assertEqual((result["public"]["score"], result["private"]["score"]), (0.0, 0.0))  # "look" wins nothing

    def test_rollouts_play_the_train_games_from_their_pddl_problem(self):
        out = os.path.join(self.scratch(), "batch.jsonl")
        done = subprocess.run(
            [sys.executable, "-m", "hflm.rollouts", "--task", "alfworld", "--checkpoint", base_dir(), "--base", base_dir(),
             "--data", os.path.join(HOME, "assets", "alfworld", "data", "train.jsonl"), "--n", "2", "--max-new-tokens",
             "8", "--threads", "1", "--out", out],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([TASKS, STANDINS])}, capture_output=True, text=True, timeout=600)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(out) as f:
            episodes = {e["name"]: e for e in map(json.loads, f)}
        self.assertEqual(sorted(episodes), ["pick_and_place_simple-Mug-None-Cabinet-10/trial_T20190907_000101_000101",
                                            "pick_heat_then_place_in_recep-Egg-None-CounterTop-10/trial_T20190907_000202_000202"])
        mug = episodes["pick_and_place_simple-Mug-None-Cabinet-10/trial_T20190907_000101_000101"]
        # the room and the task as upstream's Demangler and the game's grammar name them
        self.assertTrue(mug["prompt"].endswith(
            "Here is the task.\nYou are in the middle of a room. Looking quickly around you, you see a cabinet 2, a cabinet "
            "1, a countertop 1, a fridge 1, a microwave 1, and a sinkbasin 1.\nYour task is to: put a mug in cabinet.\n>"))
        self.assertEqual((mug["steps"], mug["reward"], len(mug["observations"])), (50, 0.0, 50))  # the tiny model wins nothing

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
