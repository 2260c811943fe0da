"""Checks of micro-example's own behaviour (the template; rename to tests/test_<id with _>.py).

    /usr/bin/python3 tasks/micro-example/tests/test_micro_example.py

test/python.test.ts runs this file for every task, and tasks/contract_test.py the checks every
task shares (task.json, generate.py, the grader on the base model and on bad checkpoints, the
rollouts, the oracle replay): test here only what is particular to this task, e.g. the reward,
the environment, how evaluation differs from training.
"""

import os
import sys
import unittest

TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(TASK))  # tasks/, for microlm
from microlm.testing import TaskDir  # noqa: E402

T = TaskDir(TASK)  # microlm and the env package in a library folder, first on sys.path, as the sandbox mounts them

from micro_example import format_prompt, reward  # noqa: E402


class Task(unittest.TestCase):
    def test_reward(self):
        self.assertEqual(reward(" pmal ", "pmal"), 1.0)
        self.assertEqual(reward("pma", "pmal"), 0.0)
        self.assertTrue(format_prompt("lamp").endswith("lamp\nAnswer: "))

    def test_evaluation_words_are_unseen(self):
        train = {it["word"] for it in T.load("data/train.jsonl")}
        held = {it["word"] for split in ("public", "private") for it in T.load(f"eval/{split}.jsonl")}
        self.assertFalse(train & held)


if __name__ == "__main__":
    unittest.main()
