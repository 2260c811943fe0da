"""gsm8k's CPU smoke profile: the TRL oracle (oracle/sft.py), run in a workspace laid out as the server lays
one out, lifts the real grader's score on both halves of the smoke fixture (fixture_hub.py --profile smoke).

    .venv-full/bin/python tasks/gsm8k/tests/test_smoke.py      # a few minutes on 2 cores

The oracle runs as a run_training job would: cwd the workspace (data/train.jsonl, models/base/, lib/hflm/),
PYTHONPATH=lib, 2 threads. The grader runs as test_gsm8k.py runs it.
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
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, os.path.join(TASKS, "hflm", "tests"))  # for fixture_hub

import fixture_hub  # noqa: E402
from hflm import assets  # noqa: E402

GRADER = os.path.join(TASK, "grader", "grade.py")
ORACLE = os.path.join(TASK, "oracle", "sft.py")
MODEL = fixture_hub.SMOKE_MODEL
MIN_GAIN = 20  # points on each half: the bar for the smoke profile
TMP = HOME = WORKSPACE = None
BASE_SCORES = None


def setUpModule():
    global TMP, HOME, WORKSPACE, BASE_SCORES
    TMP = tempfile.mkdtemp(prefix="gsm8k-smoke-")
    hub = fixture_hub.write(os.path.join(TMP, "hub"), profile="smoke")
    HOME = os.path.join(TMP, "home")
    assets.prepare("gsm8k", HOME, MODEL, hub)
    # The workspace a full-tier run gets: the visible split, the base model, the library.
    WORKSPACE = os.path.join(TMP, "workspace")
    os.makedirs(os.path.join(WORKSPACE, "models"))
    os.makedirs(os.path.join(WORKSPACE, "lib"))
    shutil.copytree(os.path.join(HOME, "assets", "gsm8k", "data"), os.path.join(WORKSPACE, "data"))
    os.symlink(base_dir(), os.path.join(WORKSPACE, "models", "base"))
    os.symlink(os.path.join(TASKS, "hflm"), os.path.join(WORKSPACE, "lib", "hflm"))
    BASE_SCORES = grade(base_dir(), "base")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def base_dir():
    return os.path.join(HOME, "models", MODEL.replace("/", "--"))


def grade(checkpoint, name):
    """The grader's result for checkpoint, run as the server runs it."""
    out_dir = os.path.join(TMP, f"grade-{name}")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "result.json")
    done = subprocess.run(
        [sys.executable, GRADER, "--checkpoint", checkpoint, "--base", base_dir(), "--base-id", MODEL,
         "--eval-dir", os.path.join(HOME, "assets", "gsm8k", "eval"), "--out", out],
        env={**os.environ, "PYTHONPATH": TASKS}, capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        raise AssertionError(f"grading {name} failed ({done.returncode}): {done.stderr[-2000:]}")
    with open(out) as f:
        result = json.load(f)
    print(f"\n{name}: public {result['public']['score']}, private {result['private']['score']}", file=sys.stderr)
    return result


def train(out_name, *extra):
    """Runs the oracle in the workspace as a run_training job would; returns the folder it wrote."""
    out = os.path.join(WORKSPACE, out_name)
    done = subprocess.run(
        [sys.executable, ORACLE, "--out", out_name, *extra], cwd=WORKSPACE,
        env={**os.environ, "PYTHONPATH": os.path.join(WORKSPACE, "lib"), "OMP_NUM_THREADS": "2"},
        capture_output=True, text=True, timeout=1800,
    )
    if done.returncode != 0:
        raise AssertionError(f"the oracle failed ({done.returncode}): {done.stderr[-3000:]}")
    return out


class SmokeTest(unittest.TestCase):
    def test_the_base_model_scores_no_better_than_writing_one_class(self):
        for split in ("public", "private"):
            self.assertLessEqual(BASE_SCORES[split]["score"], 20, split)  # five answer words: one in five

    def test_the_full_model_oracle_gains_on_both_halves(self):
        out = train("full-model")
        self.assertTrue(os.path.isfile(os.path.join(out, "config.json")))
        self.assertTrue(os.path.isfile(os.path.join(out, "model.safetensors")))
        trained = grade(out, "full")
        for split in ("public", "private"):
            self.assertGreaterEqual(trained[split]["score"] - BASE_SCORES[split]["score"], MIN_GAIN, split)

    def test_the_lora_oracle_writes_an_adapter_the_grader_merges(self):
        # No gain is asserted: LoRA learns the answer's form but not yet the lookup on this model (about 20 points
        # after 150 or 300 steps, tasks/gsm8k/oracle/README.md); 30 steps show the adapter is accepted and graded.
        out = train("lora-adapter", "--lora", "--steps", "30")
        self.assertTrue(os.path.isfile(os.path.join(out, "adapter_config.json")))
        self.assertFalse(os.path.exists(os.path.join(out, "model.safetensors")))
        trained = grade(out, "lora")
        for split in ("public", "private"):
            self.assertEqual(trained[split]["total"], BASE_SCORES[split]["total"], split)


if __name__ == "__main__":
    unittest.main()
