"""The cached, batched decoder against the definition of greedy decoding, on every task's base model.

    /usr/bin/python3 tasks/microlm/test_decode.py

Greedy decoding is: run the whole sequence through the model, append the most likely token,
repeat until EOS or max_new_tokens (`greedy_without_cache`). `generate` (a KV cache, left-padded batches, finished rows
leaving the batch) and `episodes.play` (one generate call per environment step) must give
exactly the tokens of that definition, so that grades do not depend on how decoding is done.
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402

TASKS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TASKS_ROOT)

from microlm import checkpoint, episodes, tokenizer  # noqa: E402
from microlm.decode import generate, greedy_without_cache  # noqa: E402

# How each static task's grader turns an evaluation item into a prompt.
STATIC_PROMPTS = {
    "question": lambda package, item: package.format_prompt(item["question"]),
    "instruction": lambda package, item: package.format_prompt(item["instruction"]),
    "prompt": lambda package, item: package.format_prompt(item),
}


def tasks():
    """(task id, task.json, checkpoint dir) of every micro task: they ship their base models (full-tier ones do not)."""
    found = []
    for name in sorted(os.listdir(TASKS_ROOT)):
        spec_file = os.path.join(TASKS_ROOT, name, "task.json")
        if os.path.exists(spec_file):
            with open(spec_file) as f:
                spec = json.load(f)
            if spec["tier"] == "micro":
                found.append((name, spec, os.path.join(TASKS_ROOT, name, spec["baseModel"])))
    return found


class DecoderMatchesDefinition(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        # Each task's package under its import name, as the sandbox mounts them.
        cls.lib = tempfile.mkdtemp(prefix="microlm-test-")
        for name, spec, _ in tasks():
            os.symlink(os.path.join(TASKS_ROOT, name, spec["env"]["dir"]), os.path.join(cls.lib, spec["env"]["package"]))
        sys.path.insert(0, cls.lib)

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(cls.lib)
        shutil.rmtree(cls.lib)

    def eval_items(self, name, n):
        with open(os.path.join(TASKS_ROOT, name, "eval", "public.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()][:n]

    def test_every_task_has_a_base_model_checked_here(self):
        self.assertGreaterEqual(len(tasks()), 6)

    def test_generate_is_greedy_decoding_token_for_token(self):
        for name, spec, model_dir in tasks():
            package = __import__(spec["env"]["package"])
            if hasattr(package, "make_env"):
                continue  # interactive: see the episodes test
            with self.subTest(task=name):
                model = checkpoint.load(model_dir)
                items = self.eval_items(name, 48)
                field = next(key for key in STATIC_PROMPTS if key in items[0])
                prompts = [STATIC_PROMPTS[field](package, item) for item in items]
                # Small batches of mixed lengths: padding, and rows finishing at different steps.
                cached = generate(model, prompts, 40, batch_size=16)
                self.assertEqual(cached, greedy_without_cache(model, prompts, 40))
                self.assertTrue(any(cached), "the base model writes something")

    def test_play_is_greedy_decoding_token_for_token(self):
        checked = 0
        for name, spec, model_dir in tasks():
            package = __import__(spec["env"]["package"])
            if not hasattr(package, "make_env"):
                continue
            with self.subTest(task=name):
                model = checkpoint.load(model_dir)
                games = self.eval_items(name, 6)
                max_new = package.MAX_NEW_TOKENS

                def play(decode):
                    original = episodes.generate
                    episodes.generate = decode
                    try:
                        envs = [package.make_env() for _ in games]
                        return episodes.play(model, envs, games, package.format_prompt, package.MAX_STEPS, max_new, batch_size=4)
                    finally:
                        episodes.generate = original

                cached = play(generate)
                by_definition = play(lambda m, prompts, n, **_: greedy_without_cache(m, prompts, n))
                self.assertEqual(cached, by_definition)
                self.assertGreater(sum(record["length"] for record in cached), len(games))
                checked += 1
        self.assertGreaterEqual(checked, 3)


if __name__ == "__main__":
    unittest.main()
