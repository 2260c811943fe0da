"""Checks of microlm and micro-gsm8k that run in seconds on a CPU.

    /usr/bin/python3 tasks/micro-gsm8k/tests/test_micro_gsm8k.py

Builds its own library folder (symlinks microlm and micro_gsm8k, as the sandbox
mounts them; microlm.testing), so no PYTHONPATH is needed. What every task must do
(grader, rollouts, generate.py, oracle replay) is checked by tasks/contract_test.py.
"""

import json
import os
import sys
import tempfile
import unittest

TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(TASK))  # tasks/, for microlm
from microlm.testing import TaskDir, assert_stated_figures  # noqa: E402

T = TaskDir(TASK)
sys.path.insert(0, TASK)  # for calibration.py

import torch  # noqa: E402

from microlm import CheckpointError, GPT, GPTConfig, checkpoint, data, episodes, generate, tokenizer  # noqa: E402
from micro_gsm8k import extract_answer, format_prompt, reward  # noqa: E402

BASE = T.base
torch.set_num_threads(1)


class Library(unittest.TestCase):
    def test_tokenizer_round_trip(self):
        text = "Q: 3 + 4?\nA: 7 ~"
        self.assertEqual(tokenizer.decode(tokenizer.encode(text)), text)
        self.assertRaises(ValueError, tokenizer.encode, "caf\u00e9")
        self.assertEqual(tokenizer.encode("\t", unknown="replace"), [tokenizer.UNK])

    def test_batch_targets_cover_completion_and_eos_only(self):
        x, y = data.make_batch([("ab", "cd"), ("abcde", "f")], context_len=32)
        kept = [[t for t in row if t != -100] for row in y.tolist()]
        self.assertEqual(kept[0], tokenizer.encode("cd") + [tokenizer.EOS])
        self.assertEqual(kept[1], tokenizer.encode("f") + [tokenizer.EOS])
        self.assertEqual(x[0, 0].item(), tokenizer.BOS)

    def test_batched_cached_generation_matches_one_by_one(self):
        model = checkpoint.load(BASE)
        prompts = [format_prompt(q) for q in ("Ann has 3 pens. Ann buys 4 more. How many pens does Ann have now?", "x", "")]
        batched = generate(model, prompts, 24, batch_size=3)
        self.assertEqual(batched, [generate(model, [p], 24)[0] for p in prompts])
        ids = [tokenizer.BOS] + tokenizer.encode(prompts[0])
        with torch.no_grad():  # greedy without the KV cache, token by token
            for _ in range(24):
                nxt = int(model(torch.tensor([ids]))[0][0, -1].argmax())
                if nxt == tokenizer.EOS:
                    break
                ids.append(nxt)
        self.assertEqual(batched[0], tokenizer.decode(ids[1 + len(tokenizer.encode(prompts[0])) :]))

    def test_seeded_sampling_is_reproducible(self):
        model = checkpoint.load(BASE)
        prompts = [format_prompt("Ivy had 9 eggs and lost 2 of them. How many eggs does Ivy have now?")] * 8
        first = generate(model, prompts, 24, temperature=1.0, seed=7)
        self.assertEqual(first, generate(model, prompts, 24, temperature=1.0, seed=7))
        self.assertGreater(len(set(first)), 1)

    def test_episodes_play_in_lockstep_and_record_every_step(self):
        class Countdown:
            """Done after `options["steps"]` actions; success when every action was "go"."""

            def reset(self, seed, options=None):
                self.left, self.clean = options["steps"], True
                return f"left {self.left}", {"task_type": f"count-{self.left}"}

            def step(self, action):
                self.left -= 1
                self.clean = self.clean and action == "go"
                done = self.left == 0
                return f"left {self.left}", float(done and self.clean), done, {"success": done and self.clean}

        model = GPT(GPTConfig(n_layer=1, d_model=32, n_head=2, context_len=64))
        items = [{"seed": 1, "steps": 1}, {"seed": 2, "steps": 3}, {"seed": 3, "steps": 9}]
        play = lambda **kw: episodes.play(model, [Countdown() for _ in items], items, lambda o: o + "\n>", 5, 8, **kw)
        records = play(temperature=1.0, seed=4)
        self.assertEqual([r["length"] for r in records], [1, 3, 5])  # the third is cut at max_steps
        self.assertEqual([r["task_type"] for r in records], ["count-1", "count-3", "count-9"])
        self.assertEqual([s["observation"] for s in records[1]["steps"]], ["left 3", "left 2", "left 1"])
        self.assertEqual([s["done"] for s in records[1]["steps"]], [False, False, True])
        self.assertFalse(records[2]["success"])
        self.assertTrue(all("\n" not in s["action"] for r in records for s in r["steps"]))
        self.assertEqual(records, play(temperature=1.0, seed=4))
        self.assertEqual(play(), play())
        self.assertRaises(ValueError, episodes.play, model, [Countdown()], items, str, 5, 8)

    def test_episodes_summarize_counts_success_per_task_type(self):
        record = lambda task_type, success, ret, length: {"task_type": task_type, "success": success, "return": ret, "length": length}
        records = [record("pick", True, 1.0, 4), record("pick", False, 0.0, 50), record("heat", False, 0.5, 6), record("pick", True, 1.0, 8)]
        self.assertEqual(
            episodes.summarize(records),
            {"score": 50.0, "successes": 2, "total": 4, "mean_return": 0.625, "mean_length": 17.0, "success_heat": 0.0, "success_pick": 66.67},
        )

    def test_checkpoint_round_trip_and_rejections(self):
        model = GPT(GPTConfig(n_layer=1, d_model=32, n_head=2, context_len=64))
        with tempfile.TemporaryDirectory() as d:
            checkpoint.save(model, d)
            loaded = checkpoint.load(d)
            for k, v in model.state_dict().items():
                self.assertTrue(torch.equal(v, loaded.state_dict()[k]))
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(dict(model.config.to_dict(), n_layer=9), f)
            self.assertRaisesRegex(CheckpointError, "n_layer", checkpoint.load, d)

    def test_pickled_code_is_never_run(self):
        class Evil:
            def __reduce__(self):
                return (os.system, ("touch " + marker,))

        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "pwned")
            checkpoint.save(GPT(GPTConfig(n_layer=1, d_model=32, n_head=2)), d)
            torch.save({"x": Evil()}, os.path.join(d, "model.pt"))
            self.assertRaisesRegex(CheckpointError, "plain tensors", checkpoint.load, d)
            self.assertFalse(os.path.exists(marker))


class Task(unittest.TestCase):
    def test_reward(self):
        self.assertEqual(extract_answer("3 + 4 = 7\n#### 7"), 7)
        self.assertEqual(extract_answer("#### 1 then #### -2"), -2)
        self.assertIsNone(extract_answer("7"))
        self.assertEqual(reward("x\n#### 12", "5 + 7 = 12\n#### 12"), 1.0)
        self.assertEqual(reward("#### 13", "5 + 7 = 12\n#### 12"), 0.0)

    def test_splits_are_disjoint(self):
        questions = {rel: {it["question"] for it in T.load(rel)} for rel in ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl")}
        self.assertFalse(questions["data/train.jsonl"] & (questions["eval/public.jsonl"] | questions["eval/private.jsonl"]))

    def test_rollouts_score_each_completion(self):
        with tempfile.TemporaryDirectory() as d:
            summary, rows = T.rollouts(self, os.path.join(d, "r.jsonl"), n=16, group_size=4)
        self.assertEqual(set(rows[0]), {"prompt_index", "prompt", "completion", "answer", "reward"})
        self.assertAlmostEqual(summary["mean_reward"], sum(r["reward"] for r in rows) / 16, places=4)
        train = T.load("data/train.jsonl")
        for r in rows:
            self.assertEqual(r["reward"], reward(r["completion"], train[r["prompt_index"]]["answer"]))
            self.assertEqual(r["prompt"], format_prompt(train[r["prompt_index"]]["question"]))


class Instructions(unittest.TestCase):
    # Figures are stated as whole percentages: half a point of rounding, plus slack for another BLAS build's rounding.
    TOLERANCE = 1.0

    def test_stated_base_model_figures_are_measured(self):
        import calibration

        with open(os.path.join(TASK, "instructions.md")) as f:
            text = f.read()
        self.assertIn(
            f"({calibration.GREEDY_PROBLEMS} seeded problems greedy, {calibration.SAMPLED_PROBLEMS} of them sampled "
            f"{calibration.SAMPLES_PER_PROBLEM} times at temperature 1,",
            " ".join(text.split()),
        )
        measured = calibration.calibrate(os.path.join(TASK, "model"), os.path.join(TASK, "data", "train.jsonl"))
        g, s = measured["greedy"], measured["sampled"]
        expected = {
            "worked line then `#### N`": (g["well_formed"], s["well_formed"]),
            "both operands and the sign copied from the question": (g["operands_copied"], s["operands_copied"]),
            "number after `####` equal to the worked line's result": (g["consistent"], s["consistent"]),
            "solved": (g["solved"], s["solved"]),
            "solved, worked line right throughout": (g["solved_worked_line_right"], s["solved_worked_line_right"]),
            "groups of 8 samples with at least one solved": (None, s["groups_with_a_solved_sample"]),
        }
        assert_stated_figures(self, text, expected, self.TOLERANCE)


if __name__ == "__main__":
    unittest.main()
