"""Tests of the humaneval task's grader (phase 1) on prepared fixture assets (the smoke profile's problems and model).

    .venv-full/bin/python tasks/humaneval/tests/test_humaneval.py

The grader runs as the server runs it: a fresh .venv-full Python with PYTHONPATH holding hflm only. Phase 2,
the programs run in the server's sandbox, is tested in test/execution.test.ts.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # small and shared machines: one thread is enough here
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.dirname(HERE)
TASKS = os.path.dirname(TASK)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, os.path.join(TASKS, "hflm-tests"))  # for fixture_smoke_humaneval

import fixture_grader  # noqa: E402
import fixture_smoke_humaneval  # noqa: E402
from hflm import assets, humaneval  # noqa: E402

GRADER = os.path.join(TASK, "grader", "generate.py")
# The smoke profile's base answers every problem and ends its turn (a few dozen tokens), so the grader runs on
# whole prepared halves in seconds. A random tiny model never writes its end-of-sequence token: every completion
# would run to the reference's 8,192 new tokens (seconds each on one thread).
MODEL = fixture_smoke_humaneval.SMOKE_MODEL
HOME = HUB = EVAL = None  # prepared once for the module


def setUpModule():
    global HOME, HUB, EVAL
    HUB = fixture_smoke_humaneval.write(tempfile.mkdtemp(prefix="humaneval-hub-"))
    HOME = tempfile.mkdtemp(prefix="humaneval-home-")
    assets.prepare("humaneval", HOME, MODEL, HUB)
    EVAL = os.path.join(HOME, "assets", "humaneval", "eval")


def tearDownModule():
    for path in (HUB, HOME):
        shutil.rmtree(path, ignore_errors=True)


def base_dir():
    return os.path.join(HOME, "models", MODEL.replace("/", "--"))


def read_rows(directory, split):
    with open(os.path.join(directory, f"{split}.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def eval_dir_of(halves):
    directory = tempfile.mkdtemp(prefix="humaneval-eval-")
    for split, rows in halves.items():
        with open(os.path.join(directory, f"{split}.jsonl"), "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    return directory


def generate(checkpoint, out_dir, eval_dir):
    """Runs the grader on checkpoint as the server would; returns the finished process."""
    return subprocess.run(
        [sys.executable, GRADER, "--checkpoint", checkpoint, "--base", base_dir(), "--base-id", MODEL,
         "--eval-dir", eval_dir, "--out", os.path.join(out_dir, "items.jsonl")],
        env={**os.environ, "PYTHONPATH": TASKS}, capture_output=True, text=True, timeout=600,
    )


def read_items(out_dir):
    with open(os.path.join(out_dir, "items.jsonl")) as f:
        return [json.loads(line) for line in f]


class GeneratorTest(unittest.TestCase):
    def scratch(self):
        path = tempfile.mkdtemp(prefix="humaneval-grade-")
        self.addCleanup(shutil.rmtree, path, ignore_errors=True)
        return path

    def assert_programs_of(self, items, halves):
        """items are the execute kind's whole programs, one per problem of halves, public first, in file order."""
        expected = [(split, row) for split in ("public", "private") for row in halves[split]]
        self.assertEqual([(i["split"], i["id"]) for i in items], [(split, row["task_id"]) for split, row in expected])
        for item, (_, row) in zip(items, expected):
            self.assertEqual(sorted(item), ["id", "program", "split"])  # exactly the server's whole-program item
            self.assertTrue(item["program"].startswith(row["prompt"]), item["id"])
            tail = "\n" + row["test"] + "\n" + f"check({row['entry_point']})"
            self.assertTrue(item["program"].endswith(tail), item["id"])

    def test_the_base_model_gives_one_whole_program_per_problem_of_both_halves(self):
        out_dir = self.scratch()
        done = generate(base_dir(), out_dir, EVAL)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("grading a full submission", done.stderr)
        self.assert_programs_of(read_items(out_dir), {split: read_rows(EVAL, split) for split in ("public", "private")})

    def test_the_hidden_problems_come_from_eval_dir_only(self):
        # Problems found nowhere else (not in the prepared splits, nor the visible data): the grader reads --eval-dir.
        probe = {"prompt": "def probe(x):\n", "canonical_solution": "    return x\n",
                 "test": "def check(f):\n    assert f(1) == 1\n", "entry_point": "probe"}
        halves = {split: [dict(probe, task_id=f"Probe/{split}")] for split in ("public", "private")}
        eval_dir = eval_dir_of(halves)
        self.addCleanup(shutil.rmtree, eval_dir, ignore_errors=True)
        out_dir = self.scratch()
        done = generate(base_dir(), out_dir, eval_dir)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assert_programs_of(read_items(out_dir), halves)

    def test_a_lora_adapter_is_merged_onto_the_base_and_graded(self):
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(base_dir(), dtype=torch.float32)
        # init_lora_weights=False: random A and B, so the merged model differs from the base as a trained one would.
        lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        adapter = get_peft_model(model, lora)
        submitted = self.scratch()
        adapter.save_pretrained(submitted)
        halves = {split: read_rows(EVAL, split)[:1] for split in ("public", "private")}
        eval_dir = eval_dir_of(halves)
        self.addCleanup(shutil.rmtree, eval_dir, ignore_errors=True)
        out_dir = self.scratch()
        done = generate(submitted, out_dir, eval_dir)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("grading a lora submission", done.stderr)
        self.assertTrue(os.path.exists(os.path.join(out_dir, "graded-model", "config.json")))
        self.assert_programs_of(read_items(out_dir), halves)

    def test_refuses_pickled_weights_with_what_to_do_and_writes_nothing(self):
        submitted = self.scratch()
        shutil.copyfile(os.path.join(base_dir(), "config.json"), os.path.join(submitted, "config.json"))
        with open(os.path.join(submitted, "pytorch_model.bin"), "wb") as f:
            f.write(b"not really a pickle")
        out_dir = self.scratch()
        argv = ["--checkpoint", submitted, "--base", base_dir(), "--base-id", MODEL, "--eval-dir", EVAL,
                "--out", os.path.join(out_dir, "items.jsonl")]
        status, stderr = fixture_grader.run_main(GRADER, argv)  # in this process: a refusal needs no interpreter of its own
        self.assertEqual(status, 2, stderr)
        self.assertIn("invalid checkpoint: [pickled_weights]", stderr)
        self.assertIn("safe_serialization=True", stderr)
        self.assertFalse(os.path.exists(os.path.join(out_dir, "items.jsonl")))


class DeclarationTest(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(TASK, "task.json")) as f:
            self.declared = json.load(f)

    def test_default_model_is_the_one_a2rl_prepare_builds(self):
        self.assertEqual(self.declared["defaultModel"], assets.TASKS["humaneval"].default_model)

    def test_programs_get_the_reference_time_limit(self):
        self.assertEqual(self.declared["grader"]["kind"], "execute")
        self.assertEqual(self.declared["grader"]["execution"]["timeoutSeconds"], humaneval.TIMEOUT_S)


if __name__ == "__main__":
    unittest.main()
