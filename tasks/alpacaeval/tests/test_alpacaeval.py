"""Tests of the alpacaeval task's grader entry on prepared fixture assets (hflm's fixture hub and tiny model).

    .venv-full/bin/python tasks/alpacaeval/tests/test_alpacaeval.py

The entry runs as the server runs it: a fresh .venv-full Python with PYTHONPATH holding hflm only.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.dirname(HERE)
TASKS = os.path.dirname(TASK)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, os.path.join(TASKS, "hflm-tests"))  # for fixture_hub

import fixture_grader  # noqa: E402
import fixture_hub  # noqa: E402
from hflm import alpacaeval, assets  # noqa: E402

GENERATE = os.path.join(TASK, "grader", "generate.py")
HOME = HUB = None  # prepared once for the module (the tiny model takes about 2 s)


def setUpModule():
    global HOME, HUB
    HUB = fixture_hub.write(tempfile.mkdtemp(prefix="alpacaeval-hub-"))
    HOME = tempfile.mkdtemp(prefix="alpacaeval-home-")
    assets.prepare("alpacaeval", HOME, fixture_hub.FIXTURE_MODEL, HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def base_dir():
    return os.path.join(HOME, "models", fixture_hub.FIXTURE_MODEL.replace("/", "--"))


def eval_dir():
    return os.path.join(HOME, "assets", "alpacaeval", "eval")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def generate_args(checkpoint, out_dir, eval_from=None):
    return ["--checkpoint", checkpoint, "--base", base_dir(), "--base-id", fixture_hub.FIXTURE_MODEL,
            "--eval-dir", eval_from or eval_dir(), "--out", os.path.join(out_dir, "items.jsonl")]


def generate(checkpoint, out_dir, eval_from=None):
    """Runs the grader entry on checkpoint as the server would; returns the finished process."""
    return subprocess.run([sys.executable, GENERATE, *generate_args(checkpoint, out_dir, eval_from)],
                          env={**os.environ, "PYTHONPATH": TASKS}, capture_output=True, text=True, timeout=600)


def refused(checkpoint, out_dir, eval_from=None):
    """(exit status, stderr) of the grader entry run in this process (fixture_grader), for runs it refuses."""
    return fixture_grader.run_main(GENERATE, generate_args(checkpoint, out_dir, eval_from))


class GenerateTest(unittest.TestCase):
    def scratch(self):
        path = tempfile.mkdtemp(prefix="alpacaeval-grade-")
        self.addCleanup(shutil.rmtree, path, ignore_errors=True)
        return path

    def test_answers_every_instruction_of_both_halves_with_its_reference_deterministically(self):
        runs = []
        for _ in range(2):
            out_dir = self.scratch()
            done = generate(base_dir(), out_dir)
            self.assertEqual(done.returncode, 0, done.stderr)
            runs.append(read_jsonl(os.path.join(out_dir, "items.jsonl")))
        items = runs[0]
        self.assertEqual(runs[0], runs[1])
        hidden = {split: read_jsonl(os.path.join(eval_dir(), f"{split}.jsonl")) for split in ("public", "private")}
        expected = [(split, i, row) for split in ("public", "private") for i, row in enumerate(hidden[split])]
        self.assertEqual(len(items), fixture_hub.COUNTS["alpaca_eval"])
        self.assertEqual(len(items), len(expected))
        for item, (split, i, row) in zip(items, expected):
            # The judge kind's item format, with what the length-controlled win rate needs.
            self.assertEqual(list(item), ["id", "split", "instruction", "constraints", "reference", "response", "instruction_difficulty"])
            self.assertEqual((item["id"], item["split"], item["instruction"]), (f"{split}-{i}", split, row["instruction"]))
            self.assertIsNone(item["constraints"])
            self.assertEqual(item["reference"], row["output"])  # alpaca_eval_gpt4_baseline's output
            self.assertEqual(item["instruction_difficulty"], row["instruction_difficulty"])
            self.assertIsInstance(item["response"], str)
            self.assertEqual(item["response"], item["response"].strip())
        # The responses are exactly hflm.alpacaeval's: the reference's prompt and generation.
        torch.set_num_threads(1)  # as the grader decodes: float32 sums then add up in the same order
        self.assertEqual([item["response"] for item in items], alpacaeval.respond(base_dir(), [item["instruction"] for item in items]))

    def test_refuses_pickled_weights_with_what_to_do_and_writes_nothing(self):
        submitted = self.scratch()
        shutil.copyfile(os.path.join(base_dir(), "config.json"), os.path.join(submitted, "config.json"))
        with open(os.path.join(submitted, "pytorch_model.bin"), "wb") as f:
            f.write(b"not really a pickle")
        out_dir = self.scratch()
        status, stderr = refused(submitted, out_dir)
        self.assertEqual(status, 2, stderr)
        self.assertIn("invalid checkpoint: [pickled_weights]", stderr)
        self.assertIn("safe_serialization=True", stderr)
        self.assertFalse(os.path.exists(os.path.join(out_dir, "items.jsonl")))

    def test_refuses_assets_without_instruction_difficulty_naming_the_prepare_command(self):
        old_eval = self.scratch()
        for split in ("public", "private"):
            rows = read_jsonl(os.path.join(eval_dir(), f"{split}.jsonl"))
            with open(os.path.join(old_eval, f"{split}.jsonl"), "w") as f:
                f.writelines(json.dumps({k: v for k, v in r.items() if k != "instruction_difficulty"}) + "\n" for r in rows)
        out_dir = self.scratch()
        status, stderr = refused(base_dir(), out_dir, eval_from=old_eval)
        self.assertEqual(status, 1, stderr)
        self.assertIn("row 0 lacks instruction_difficulty; prepare the assets again (a2rl prepare alpacaeval)", stderr)
        self.assertFalse(os.path.exists(os.path.join(out_dir, "items.jsonl")))


class GenerationTest(unittest.TestCase):
    def test_the_reference_settings_one_user_turn_greedy_512_tokens_chat_template(self):
        self.assertEqual(alpacaeval.messages("Name a colour."), [{"role": "user", "content": "Name a colour."}])
        params = alpacaeval.GENERATION
        self.assertEqual((params.max_new_tokens, params.temperature, params.top_p, params.n, params.stop, params.chat_template),
                         (512, 0.0, 1.0, 1, (), True))


class DeclarationTest(unittest.TestCase):
    def test_task_json_default_model_is_the_one_a2rl_prepare_builds_and_it_is_judged(self):
        with open(os.path.join(TASK, "task.json")) as f:
            declared = json.load(f)
        self.assertEqual(declared["defaultModel"], assets.TASKS["alpacaeval"].default_model)
        self.assertEqual((declared["tier"], declared["grader"]["kind"], declared["grader"]["entry"]), ("full", "judge", "generate.py"))


if __name__ == "__main__":
    unittest.main()
