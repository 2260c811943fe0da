"""hflm.rollouts on the fixture hub's three tasks as a2rl prepare builds them: the group layout, determinism,
each task's fields and reward, a LoRA adapter as the policy, and the refusals.

    .venv-full/bin/python tasks/hflm-tests/test_rollouts.py
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # small and shared machines: one thread is enough here
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no progress bars between the test dots

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, HERE)
sys.path.append(os.path.join(TASKS, "hflm", "standins"))  # alfworld's stand-in, after site-packages: a real alfworld wins

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.utils import logging as transformers_logging  # noqa: E402

import fixture_hub  # noqa: E402
from hflm import assets, rollouts  # noqa: E402
from hflm.submission import materialise  # noqa: E402

transformers_logging.disable_progress_bar()
transformers_logging.set_verbosity_error()

SHORT = ["--max-new-tokens", "12", "--threads", "1"]  # the tiny model's completions need not be long
RUNS = 0  # numbers each run's output file
# The tasks sampled here. alfworld's and webshop's samplers are seeded the same way, but this fixture model walks all
# 50 steps of their episodes (about 35 s a batch): their own suites cover them.
SAMPLED = [task for task in rollouts.TASKS if task not in ("alfworld", "webshop", "webshop-human")]


def setUpModule():
    global ROOT, HOME, BASE, ADAPTER
    ROOT = tempfile.mkdtemp(prefix="hflm-rollouts-")
    hub = fixture_hub.write(os.path.join(ROOT, "hub"))
    HOME = os.path.join(ROOT, "home")
    for task in SAMPLED:
        assets.prepare(task, HOME, fixture_hub.FIXTURE_MODEL, hub)
    BASE = assets.model_folder(HOME, fixture_hub.FIXTURE_MODEL)
    # init_lora_weights=False: random A and B, so the adapter changes the outputs as trained weights would.
    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    ADAPTER = os.path.join(ROOT, "adapter")
    model.save_pretrained(ADAPTER)


def tearDownModule():
    shutil.rmtree(ROOT, ignore_errors=True)


def data(task):
    return os.path.join(HOME, "assets", task, "data", "train.jsonl")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def run(task, *extra, checkpoint=None, n=4, group_size=2, seed=7, out=None):
    """Runs main in this process: (exit status, episodes or None, stdout, stderr)."""
    global RUNS
    RUNS += 1
    out = out or os.path.join(ROOT, f"run-{RUNS}.jsonl")
    argv = ["--task", task, "--checkpoint", checkpoint or BASE, "--base", BASE, "--data", data(task),
            "--n", str(n), "--group-size", str(group_size), "--temperature", "1.0", "--seed", str(seed),
            "--out", out, *SHORT, *extra]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = rollouts.main(argv)
        except SystemExit as e:
            status = e.code
    episodes = read_jsonl(out) if os.path.exists(out) else None
    return status, episodes, stdout.getvalue(), stderr.getvalue()


class Layout(unittest.TestCase):
    def check_layout(self, task, task_fields):
        status, episodes, stdout, stderr = run(task, n=6, group_size=3)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(len(episodes), 6)
        rows = read_jsonl(data(task))
        self.assertEqual([e["group"] for e in episodes], [0, 0, 0, 1, 1, 1])
        ids = [episodes[0]["prompt_id"], episodes[3]["prompt_id"]]
        self.assertNotEqual(ids[0], ids[1])  # distinct rows per group
        for e in episodes:
            self.assertEqual(e["prompt_id"], ids[e["group"]])
            self.assertEqual(set(e), {"group", "prompt_id", "prompt", "completion", *task_fields})
            self.assertIsInstance(e["completion"], str)
            self.assertEqual(e["prompt"][-1]["role"], "user")
            self.assertEqual(rollouts.TASKS[task].messages(rows[e["prompt_id"]]), e["prompt"])  # the grader's prompt
        summary = json.loads(stdout)
        self.assertEqual(summary["episodes"], 6)
        return episodes, rows

    def test_gsm8k(self):
        episodes, rows = self.check_layout("gsm8k", ["question", "answer", "prediction", "reward"])
        for e in episodes:
            self.assertIn(e["reward"], (0.0, 1.0))
            self.assertEqual((e["question"], e["answer"]), (rows[e["prompt_id"]]["question"], rows[e["prompt_id"]]["answer"]))
        self.assertEqual(len(episodes[0]["prompt"]), 9)  # the grader's 4 shots and the question

    def test_humaneval(self):
        episodes, rows = self.check_layout("humaneval", ["task_id", "reward"])
        for e in episodes:
            self.assertIn(e["reward"], (0.0, 1.0))
            self.assertEqual(e["task_id"], rows[e["prompt_id"]]["task_id"])

    def test_alpacaeval_leaves_the_reward_to_the_judge(self):
        episodes, rows = self.check_layout("alpacaeval", ["instruction", "reference"])
        for e in episodes:
            self.assertEqual(e["instruction"], rows[e["prompt_id"]]["instruction"])
            self.assertEqual(e["reference"], rows[e["prompt_id"]]["output"])
            self.assertEqual(e["completion"], e["completion"].strip())

    def test_greedy_groups_repeat_one_completion(self):
        status, episodes, _, stderr = run("gsm8k", "--temperature", "0", n=2, group_size=2)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(episodes[0]["completion"], episodes[1]["completion"])


class Determinism(unittest.TestCase):
    def test_the_same_seed_gives_the_same_file_and_another_seed_other_prompts(self):
        for task in SAMPLED:  # the static tasks and deepsearchqa's episodes
            with self.subTest(task=task):
                a, b = (os.path.join(ROOT, f"{task}-{k}.jsonl") for k in "ab")
                self.assertEqual(run(task, out=a)[0], 0)
                self.assertEqual(run(task, out=b)[0], 0)
                with open(a, "rb") as fa, open(b, "rb") as fb:
                    self.assertEqual(fa.read(), fb.read())
        first, other = run("alpacaeval", seed=1)[1], run("alpacaeval", seed=2)[1]
        self.assertNotEqual([e["prompt_id"] for e in first], [e["prompt_id"] for e in other])


class Rewards(unittest.TestCase):
    def test_gsm8k_rewards_the_reference_number(self):
        row = read_jsonl(data("gsm8k"))[3]  # answer "... #### 5"
        right = rollouts.episode_fields("gsm8k", row, "3 + 2 = 5\nThe answer is 5\n")
        self.assertEqual((right["reward"], right["prediction"]), (1.0, "5"))
        wrong = rollouts.episode_fields("gsm8k", row, "The answer is 6\nQuestion: 5")
        self.assertEqual((wrong["reward"], wrong["prediction"]), (0.0, "6"))
        self.assertEqual(rollouts.episode_fields("gsm8k", row, "no idea")["prediction"], None)

    def test_humaneval_rewards_a_passing_program(self):
        row = read_jsonl(data("humaneval"))[5]
        fenced = "```python\n" + row["prompt"] + row["canonical_solution"] + "```"
        self.assertEqual(rollouts.episode_fields("humaneval", row, fenced)["reward"], 1.0)
        self.assertEqual(rollouts.episode_fields("humaneval", row, "    return x\n")["reward"], 0.0)

    def test_alpaca_input_follows_the_instruction(self):
        fields = rollouts.episode_fields("alpacaeval", {"instruction": "Sum these.", "input": "1, 2", "output": "3"}, "3")
        self.assertEqual(fields, {"instruction": "Sum these.\n\n1, 2", "reference": "3"})


class Adapter(unittest.TestCase):
    def test_an_adapter_samples_as_its_merged_model(self):
        status, episodes, _, stderr = run("gsm8k", checkpoint=ADAPTER)
        self.assertEqual(status, 0, stderr)
        self.assertIn("merging the adapter", stderr)
        merged = os.path.join(ROOT, "merged")
        materialise(ADAPTER, BASE, merged)
        status, from_merged, _, stderr = run("gsm8k", checkpoint=merged)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(episodes, from_merged)
        self.assertNotEqual(episodes, run("gsm8k")[1])  # the adapter changed the policy

    def test_a_trainer_folder_is_completed_and_a_plain_model_read_in_place(self):
        status, in_place, _, stderr = run("humaneval")
        self.assertEqual(status, 0, stderr)
        self.assertNotIn("completing the model", stderr)
        trainer = os.path.join(ROOT, "trainer")
        shutil.copytree(BASE, trainer)
        open(os.path.join(trainer, "training_args.bin"), "wb").close()  # left out unread, as at submit
        status, completed, _, stderr = run("humaneval", checkpoint=trainer)
        self.assertEqual(status, 0, stderr)
        self.assertIn("completing the model", stderr)
        self.assertEqual(completed, in_place)


class Refusals(unittest.TestCase):
    def refused(self, *extra, task="gsm8k", **kwargs):
        out = os.path.join(ROOT, "refused.jsonl")
        status, episodes, _, stderr = run(task, *extra, out=out, **kwargs)
        self.assertEqual(status, 2)
        self.assertIsNone(episodes)  # nothing written
        return stderr

    def test_bad_arguments(self):
        self.assertIn("invalid choice: 'mmlu'", self.refused(task="mmlu"))
        self.assertIn("must be a positive multiple of --group-size", self.refused(n=5, group_size=2))
        self.assertIn("--top-p", self.refused("--top-p", "0"))
        self.assertIn("--data has only 5 rows", self.refused(n=12, group_size=2))

    def test_bad_data(self):
        self.assertIn("cannot read --data", self.refused("--data", os.path.join(ROOT, "missing.jsonl")))
        bad = os.path.join(ROOT, "bad.jsonl")
        with open(bad, "w") as f:
            f.write(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
        self.assertIn('--data line 1 is not a gsm8k row: every line must be a JSON object with "question"', self.refused("--data", bad))
        self.assertIn("is not a humaneval row", self.refused("--data", data("gsm8k"), task="humaneval"))

    def test_bad_checkpoints(self):
        pickled = os.path.join(ROOT, "pickled")
        shutil.copytree(BASE, pickled)
        open(os.path.join(pickled, "pytorch_model.bin"), "wb").close()
        self.assertIn("invalid checkpoint (pickled_weights)", self.refused(checkpoint=pickled))
        self.assertIn("invalid checkpoint (missing_config)", self.refused(checkpoint=ROOT + "/hub"))
        self.assertIn("invalid checkpoint (not_a_folder)", self.refused(checkpoint=os.path.join(ROOT, "nothing")))
        self.assertIn("--base", self.refused("--base", os.path.join(ROOT, "hub")))

    def test_the_command_line(self):
        """python -m hflm.rollouts as launch_rollouts starts it: a run's summary line (its refusals: test_bad_arguments)."""
        env = {**os.environ, "PYTHONPATH": TASKS}
        command = [sys.executable, "-m", "hflm.rollouts", "--checkpoint", BASE, "--base", BASE, "--data", data("gsm8k"),
                   "--n", "2", "--group-size", "2", "--seed", "1", *SHORT]
        out = os.path.join(ROOT, "cli", "batch-001.jsonl")  # a folder that does not exist yet
        done = subprocess.run(command + ["--task", "gsm8k", "--out", out], capture_output=True, text=True, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        summary = json.loads(done.stdout)
        episodes = read_jsonl(out)
        self.assertEqual((summary["episodes"], summary["out"], len(episodes)), (2, out, 2))
        self.assertEqual(summary["mean_reward"], sum(e["reward"] for e in episodes) / 2)


if __name__ == "__main__":
    unittest.main()
