"""humaneval's CPU smoke profile: the TRL oracle (oracle/sft.py), run in a workspace laid out as the server lays
one out, lifts pass@1 on both halves of the smoke fixture (fixture_smoke_humaneval.py), graded by the real grader.

    .venv-full/bin/python tasks/humaneval/tests/test_smoke.py      # several minutes on 2 cores

The oracle runs as a run_training job would: cwd the workspace (data/train.jsonl, models/base/, lib/hflm/),
PYTHONPATH=lib, 2 threads. The grader (phase 1) runs as test_humaneval.py runs it; each program it writes is
then run with hflm.humaneval.run_program, what the server's sandbox does in phase 2.
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
sys.path.insert(0, os.path.join(TASKS, "hflm", "tests"))  # for fixture_smoke_humaneval

import fixture_smoke_humaneval  # noqa: E402
from hflm import assets, humaneval  # noqa: E402

GRADER = os.path.join(TASK, "grader", "generate.py")
ORACLE = os.path.join(TASK, "oracle", "sft.py")
MODEL = fixture_smoke_humaneval.SMOKE_MODEL
MIN_GAIN = 20  # points on each half: the bar for the smoke profile
SPLITS = ("public", "private")
TMP = HOME = WORKSPACE = None
BASE_SCORES = None


def setUpModule():
    global TMP, HOME, WORKSPACE, BASE_SCORES
    TMP = tempfile.mkdtemp(prefix="humaneval-smoke-")
    hub = fixture_smoke_humaneval.write(os.path.join(TMP, "hub"))
    HOME = os.path.join(TMP, "home")
    assets.prepare("humaneval", HOME, MODEL, hub)
    # The workspace a full-tier run gets: the visible split, the base model, the library.
    WORKSPACE = os.path.join(TMP, "workspace")
    os.makedirs(os.path.join(WORKSPACE, "models"))
    os.makedirs(os.path.join(WORKSPACE, "lib"))
    shutil.copytree(os.path.join(HOME, "assets", "humaneval", "data"), os.path.join(WORKSPACE, "data"))
    os.symlink(base_dir(), os.path.join(WORKSPACE, "models", "base"))
    os.symlink(os.path.join(TASKS, "hflm"), os.path.join(WORKSPACE, "lib", "hflm"))
    BASE_SCORES = grade(base_dir(), "base")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def base_dir():
    return os.path.join(HOME, "models", MODEL.replace("/", "--"))


def grade(checkpoint, name):
    """pass@1 per half: the grader's programs for checkpoint, each run as the server's sandbox runs it."""
    out_dir = os.path.join(TMP, f"grade-{name}")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "programs.jsonl")
    done = subprocess.run(
        [sys.executable, GRADER, "--checkpoint", checkpoint, "--base", base_dir(), "--base-id", MODEL,
         "--eval-dir", os.path.join(HOME, "assets", "humaneval", "eval"), "--out", out],
        env={**os.environ, "PYTHONPATH": TASKS}, capture_output=True, text=True, timeout=1800,
    )
    if done.returncode != 0:
        raise AssertionError(f"grading {name} failed ({done.returncode}): {done.stderr[-2000:]}")
    passed = {split: [] for split in SPLITS}
    with open(out) as f:
        for line in f:
            record = json.loads(line)
            passed[record["split"]].append(humaneval.run_program(record["program"]))
    scores = {split: 100 * sum(p) / len(p) for split, p in passed.items()}
    print(f"\n{name}: public {scores['public']:.2f}, private {scores['private']:.2f}", file=sys.stderr)
    return scores


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
    def test_the_base_model_scores_zero(self):
        for split in SPLITS:
            self.assertEqual(BASE_SCORES[split], 0, split)

    def test_the_full_model_oracle_gains_on_both_halves(self):
        out = train("full-model")
        self.assertTrue(os.path.isfile(os.path.join(out, "config.json")))
        self.assertTrue(os.path.isfile(os.path.join(out, "model.safetensors")))
        trained = grade(out, "full")
        for split in SPLITS:
            self.assertGreaterEqual(trained[split] - BASE_SCORES[split], MIN_GAIN, split)

    def test_the_lora_oracle_writes_an_adapter_the_grader_merges(self):
        out = train("lora-adapter", "--lora")
        self.assertTrue(os.path.isfile(os.path.join(out, "adapter_config.json")))
        self.assertFalse(os.path.exists(os.path.join(out, "model.safetensors")))
        trained = grade(out, "lora")
        for split in SPLITS:
            self.assertGreaterEqual(trained[split] - BASE_SCORES[split], MIN_GAIN, split)


if __name__ == "__main__":
    unittest.main()
