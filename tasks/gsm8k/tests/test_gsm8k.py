"""Tests of the gsm8k task's grader on prepared fixture assets (hflm's fixture hub and tiny model).

    .venv-full/bin/python tasks/gsm8k/tests/test_gsm8k.py

The grader runs as the server runs it: a fresh .venv-full Python with PYTHONPATH holding hflm only; runs that stop
before grading (refusals) run its main in this process.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.dirname(HERE)
TASKS = os.path.dirname(TASK)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, os.path.join(TASKS, "hflm-tests"))  # for fixture_hub

import fixture_grader  # noqa: E402
import fixture_hub  # noqa: E402
import torch  # noqa: E402
from hflm import assets  # noqa: E402

GRADER = os.path.join(TASK, "grader", "grade.py")
HOME = HUB = None  # prepared once for the module (the tiny model takes about 2 s)


def setUpModule():
    global HOME, HUB
    HUB = fixture_hub.write(tempfile.mkdtemp(prefix="gsm8k-hub-"))
    HOME = tempfile.mkdtemp(prefix="gsm8k-home-")
    assets.prepare("gsm8k", HOME, fixture_hub.FIXTURE_MODEL, HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def base_dir():
    return os.path.join(HOME, "models", fixture_hub.FIXTURE_MODEL.replace("/", "--"))


def grader_args(checkpoint, out_dir):
    return ["--checkpoint", checkpoint, "--base", base_dir(), "--base-id", fixture_hub.FIXTURE_MODEL,
            "--eval-dir", os.path.join(HOME, "assets", "gsm8k", "eval"), "--out", os.path.join(out_dir, "result.json")]


def grade(checkpoint, out_dir):
    """Runs the grader on checkpoint as the server would; returns the finished process."""
    return subprocess.run([sys.executable, GRADER, *grader_args(checkpoint, out_dir)],
                          env={**os.environ, "PYTHONPATH": TASKS}, capture_output=True, text=True, timeout=600)


def grade_in_process(checkpoint, out_dir, **environ):
    """(exit status, stderr) of the grader run in this process (fixture_grader), for runs that stop before grading."""
    return fixture_grader.run_main(GRADER, grader_args(checkpoint, out_dir), environ)


class GraderTest(unittest.TestCase):
    def scratch(self):
        path = tempfile.mkdtemp(prefix="gsm8k-grade-")
        self.addCleanup(shutil.rmtree, path, ignore_errors=True)
        return path

    def test_grades_the_base_model_in_the_form_the_server_reads_deterministically(self):
        results = []
        for _ in range(2):
            out_dir = self.scratch()
            done = grade(base_dir(), out_dir)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(os.path.join(out_dir, "result.json")) as f:
                results.append(json.load(f))
        result = results[0]
        self.assertEqual(results[0], results[1])
        self.assertEqual(result["grader_version"], "gsm8k-grader-1")
        totals = [result[split]["total"] for split in ("public", "private")]
        self.assertEqual(sum(totals), fixture_hub.COUNTS["gsm8k_test"])
        for split in ("public", "private"):
            self.assertTrue(0 <= result[split]["score"] <= 100)
            self.assertEqual(result[split]["score"], round(100 * result[split]["correct"] / result[split]["total"], 2))
        whole = result["private"]
        self.assertEqual(whole["whole_total"], sum(totals))
        self.assertEqual(whole["whole_correct"], result["public"]["correct"] + result["private"]["correct"])
        self.assertNotIn("whole_score", result["public"])  # with the public score it would give the private one away

    def test_refuses_pickled_weights_with_what_to_do_and_writes_no_score(self):
        submitted = self.scratch()
        for name in ("config.json",):
            shutil.copyfile(os.path.join(base_dir(), name), os.path.join(submitted, name))
        with open(os.path.join(submitted, "pytorch_model.bin"), "wb") as f:
            f.write(b"not really a pickle")
        out_dir = self.scratch()
        status, stderr = grade_in_process(submitted, out_dir)
        self.assertEqual(status, 2, stderr)
        self.assertIn("invalid checkpoint: [pickled_weights]", stderr)
        self.assertIn("safe_serialization=True", stderr)
        self.assertFalse(os.path.exists(os.path.join(out_dir, "result.json")))


    def test_both_halves_are_decoded_by_one_generate_call(self):
        # One call is one vLLM engine on a GPU: a second costs its start-up again and can run out of memory beside the first.
        from hflm import inference

        grader = fixture_grader.load(GRADER)
        calls = []
        decode = inference.BACKENDS["transformers"]

        def counted(model_dir, prompts, params, batch_size):
            calls.append(len(prompts))
            return decode(model_dir, prompts, params, batch_size)

        with mock.patch.dict(inference.BACKENDS, {"transformers": counted}):
            self.assertEqual(grader.main(grader_args(base_dir(), self.scratch())), 0)
        self.assertEqual(calls, [fixture_hub.COUNTS["gsm8k_test"]])

    @unittest.skipUnless(torch.version.cuda is None, "a CUDA build of torch: this checks a CPU-only runtime")
    def test_given_gpus_it_cannot_use_it_fails_saying_why_instead_of_grading_on_cpu(self):
        out_dir = self.scratch()
        status, stderr = grade_in_process(base_dir(), out_dir, A2RL_REQUIRE_GPU="1")
        self.assertEqual(status, 3)  # hflm.grading's: the reason is the log's last line, for get_score
        self.assertRegex(stderr.strip().splitlines()[-1],
                         r"^grading failed: GPU unavailable: this job was given GPUs but cannot use them, and will not fall back to CPU: "
                         r".*CPU build; build the GPU runtime on this host: A2RL_FULL_GPU=1 sh scripts/setup.sh")
        self.assertFalse(os.path.exists(os.path.join(out_dir, "result.json")))


class DeclarationTest(unittest.TestCase):
    def test_task_json_default_model_is_the_one_a2rl_prepare_builds(self):
        with open(os.path.join(TASK, "task.json")) as f:
            declared = json.load(f)
        self.assertEqual(declared["defaultModel"], assets.TASKS["gsm8k"].default_model)


if __name__ == "__main__":
    unittest.main()
