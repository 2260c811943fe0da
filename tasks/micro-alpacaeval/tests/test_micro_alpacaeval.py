"""Checks of micro-alpacaeval that run in seconds on a CPU.

    /usr/bin/python3 tasks/micro-alpacaeval/tests/test_micro_alpacaeval.py

Builds its own library folder (symlinks microlm and micro_alpacaeval, as the
sandbox mounts them; microlm.testing), so no PYTHONPATH is needed. The microlm package
itself is tested by tasks/micro-gsm8k/tests; what every task must do (grader determinism
and refusals, rollouts, generate.py, oracle replay) by tasks/contract_test.py.
"""

import json
import os
import re
import sys
import tempfile
import unittest

TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(TASK))  # tasks/, for microlm
from microlm.testing import TaskDir, assert_stated_figures  # noqa: E402

T = TaskDir(TASK)
sys.path.insert(0, os.path.join(TASK, "grader"))  # judge.py

import judge  # noqa: E402
from micro_alpacaeval import constraints, format_completion, format_prompt  # noqa: E402
from micro_alpacaeval.constraints import check, describe, failed, satisfied, words  # noqa: E402
from micro_alpacaeval.lexicon import WORDS, known_fraction  # noqa: E402

BASE = T.base
SPLITS = ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl")
run, load = T.run, T.load


class Constraints(unittest.TestCase):
    # (constraint, texts that obey it, texts that break it)
    CASES = [
        ({"type": "bullets", "count": 2}, ["- Tea is warm.\n- It relaxes.", "Hi Sam,\n  - One.\n- Two."],
         ["- Only one.", "- A.\n- B.\n- C.", "1. A.\n2. B.", "A - B - C."]),
        ({"type": "numbered"}, ["1. Rinse it.\n2. Cook it.", "Dear Sam,\n1. A.\n2. B.\n3. C."],
         ["1. Only one.", "1. A.\n3. B.", "2. A.\n3. B.", "1. A.\n2. B.\n- C.", "- A.\n- B."]),
        ({"type": "one_sentence"}, ["Tea is a warm drink.", "Is it warm?", "Yes, I can come!"],
         ["Tea is warm. It relaxes.", "Tea is warm", "Hi Sam,\nTea is warm.", "Wow! Tea."]),
        ({"type": "all_caps"}, ["TEA IS WARM.", "DEAR SAM,\n- A 2ND CUP."], ["TEA IS wARM.", "Tea is warm."]),
        ({"type": "lowercase"}, ["tea is warm.", "hi sam!"], ["tea is Warm.", "TEA."]),
        ({"type": "max_words", "count": 4}, ["Tea is warm.", "Tea: don't stop, 1 2 3 4 5."],
         ["Tea is very warm now.", ""]),
        ({"type": "exact_words", "count": 3}, ["Tea is warm.", "- Tea, is... warm!"], ["Tea is.", "Tea is so warm."]),
        ({"type": "include", "word": "Routine"}, ["Keep a routine.", "ROUTINE!"], ["Keep routines.", "No rou-tine."]),
        ({"type": "exclude", "word": "warm"}, ["Tea is hot.", "Tea is warmer."], ["Tea is WARM.", "warm"]),
        ({"type": "formal"}, ["Dear Sam,\nThe meeting is on Monday.", "\nDEAR SAM, it is fine."],
         ["Hi Sam,\nThe meeting is on Monday.", "Dear Sam,\nIt's on Monday.", "Dear Sam,\nSee you!", "Dear, Sam."]),
        ({"type": "friendly"}, ["Hi Sam! See you.", "Great!"], ["Hi Sam, see you.", ""]),
    ]

    def test_every_type_on_positive_and_negative_examples(self):
        self.assertEqual({c["type"] for c, _, _ in self.CASES}, set(constraints.TYPES))
        for constraint, good, bad in self.CASES:
            for text in good:
                self.assertTrue(check(constraint, text), (constraint, text))
            for text in bad:
                self.assertFalse(check(constraint, text), (constraint, text))
            self.assertIsInstance(describe(constraint), str)

    def test_a_response_without_words_satisfies_nothing(self):
        for constraint, _, _ in self.CASES:
            for text in ("", "  \n", "!!!", "- 1.\n- 2."):
                self.assertFalse(check(constraint, text), (constraint, text))

    def test_words_and_helpers(self):
        self.assertEqual(words("- Don't stop: 3 cups, well-known!"), ["Don't", "stop", "cups", "well", "known"])
        cs = [{"type": "lowercase"}, {"type": "max_words", "count": 2}]
        self.assertEqual(satisfied(cs, "tea is warm."), 1)
        self.assertEqual(failed(cs, "tea is warm."), [cs[1]])
        self.assertEqual(describe({"type": "max_words", "count": 12}), "at most 12 words")

    def test_malformed_constraints_are_rejected(self):
        for bad in ({"type": "shout"}, {"type": "bullets"}, {"type": "bullets", "count": 0},
                    {"type": "max_words", "count": True}, {"type": "include", "word": "two words"}, "bullets"):
            self.assertRaises(ValueError, check, bad, "text")

    def test_prompt_format(self):
        self.assertEqual(format_prompt("Describe tea."), "Instruction: Describe tea.\nResponse:\n")
        self.assertEqual(format_completion("Tea is warm."), "Tea is warm.")


class Data(unittest.TestCase):
    def test_splits_are_disjoint_and_eval_combinations_unseen(self):
        sys.path.insert(0, TASK)
        try:
            import generate
        finally:
            sys.path.remove(TASK)
        patterns = []  # the task sentence of each kind, as a regex capturing its subject
        for kind, phrases in generate.TASK_PHRASES.items():
            for phrase in phrases:
                regex = re.escape(phrase).replace(r"\{subject\}", "(?P<subject>.+?)")
                regex = regex.replace(r"\{n\}", "(two|three|some)").replace(r"\{name\}", "[A-Z][a-z]+")
                patterns.append((kind, re.compile(regex + "(?= |$)")))

        def combination(item):
            for kind, pattern in patterns:
                m = pattern.match(item["instruction"])
                if m and m.group("subject") in generate.BANKS[kind]:
                    return kind, m.group("subject"), frozenset(c["type"] for c in item["constraints"])
            self.fail(f"no task sentence in {item['instruction']!r}")

        train, public, private = (load(rel) for rel in SPLITS)
        self.assertEqual((len(train), len(public), len(private)), (4000, 200, 200))
        instructions = [it["instruction"] for it in train + public + private]
        self.assertEqual(len(set(instructions)), len(instructions))
        ids = [it["id"] for it in train + public + private]
        self.assertEqual(len(set(ids)), len(ids))
        seen = {combination(it) for it in train}
        for item in public + private:
            self.assertNotIn(combination(item), seen, item["instruction"])

    def test_references_break_at_most_one_constraint_and_read_well(self):
        flawed = 0
        for rel in SPLITS:
            for item in load(rel):
                self.assertLessEqual(len(failed(item["constraints"], item["reference"])), 1, item)
                flawed += bool(failed(item["constraints"], item["reference"]))
                checks = judge.quality_checks(item["instruction"], item["reference"])
                self.assertEqual(sum(checks.values()), len(checks), (item, checks))
                self.assertEqual(known_fraction(item["reference"]), 1.0, item)
                self.assertLessEqual(len(format_prompt(item["instruction"])), 124)
                self.assertLessEqual(len(item["reference"]), 120)
        self.assertTrue(0.2 < flawed / 4400 < 0.4, flawed)
        self.assertIn("routine", WORDS)


class Judge(unittest.TestCase):
    PAIRS = [
        {"id": "p1", "instruction": "Describe tea. Use only capital letters.", "constraints": [{"type": "all_caps"}],
         "output_a": "TEA IS A WARM DRINK MADE FROM LEAVES.", "output_b": "Tea is a warm drink made from leaves."},
        {"id": "p2", "instruction": "Describe tea.", "constraints": [],
         "output_a": "Tea is a warm drink made from leaves.", "output_b": "Tea is a warm drink made from leaves."},
        {"id": "p3", "instruction": "Describe tea. Use at most 9 words.", "constraints": [{"type": "max_words", "count": 9}],
         "output_a": "Tea is a warm drink made from leaves", "output_b": "Tea is a warm drink made from leaves."},
        {"id": "p4", "instruction": "Describe tea. Use at most 9 words.", "constraints": [{"type": "max_words", "count": 9}],
         "output_a": "", "output_b": "Tea tea tea tea tea tea tea tea tea"},
        {"id": "p5", "instruction": "Describe tea. Use at most 9 words.", "constraints": [{"type": "max_words", "count": 9}],
         "output_a": "Tea is a warm drink.", "output_b": "Tqa zs a wxrm dtink."},
    ]

    def write_pairs(self, d, pairs):
        path = os.path.join(d, "pairs.jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(p) + "\n" for p in pairs))
        return path

    def test_cli_contract_and_determinism(self):
        with tempfile.TemporaryDirectory() as d:
            pairs = self.write_pairs(d, self.PAIRS)
            outputs = []
            for name in ("a.jsonl", "b.jsonl"):
                proc = run(["grader/judge.py", "--pairs", pairs, "--out", os.path.join(d, name)])
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(os.path.join(d, name)) as f:
                    outputs.append(f.read())
            self.assertEqual(outputs[0], outputs[1])
            verdicts = [json.loads(line) for line in outputs[0].splitlines()]
        self.assertEqual([v["id"] for v in verdicts], [p["id"] for p in self.PAIRS])
        for v in verdicts:
            self.assertEqual(set(v), {"id", "preference", "score_a", "score_b"})
            self.assertIn(v["preference"], ("a", "b", "tie"))
        # Constraint first; then quality (no final period, a word loop, unknown words); identical is a tie.
        self.assertEqual([v["preference"] for v in verdicts], ["a", "tie", "b", "b", "a"])
        self.assertEqual(verdicts[3]["score_a"], 0.0)
        self.assertEqual(verdicts[1]["score_a"], 11.0)

    def test_swapping_the_outputs_swaps_the_verdict(self):
        mirror = {"a": "b", "b": "a", "tie": "tie"}
        pairs = list(self.PAIRS)
        for item in load("eval/public.jsonl")[:40]:  # references against each other's texts
            pairs.append({"id": item["id"], "instruction": item["instruction"], "constraints": item["constraints"],
                          "output_a": item["reference"], "output_b": item["reference"].upper()})
        for pair in pairs:
            forward = judge.judge(pair)
            backward = judge.judge(dict(pair, output_a=pair["output_b"], output_b=pair["output_a"]))
            self.assertEqual(backward["preference"], mirror[forward["preference"]], pair)
            self.assertEqual((backward["score_a"], backward["score_b"]), (forward["score_b"], forward["score_a"]))

    def test_bad_pairs_exit_2_without_output(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "v.jsonl")
            pairs = self.write_pairs(d, [dict(self.PAIRS[0], constraints=[{"type": "nope"}])])
            proc = run(["grader/judge.py", "--pairs", pairs, "--out", out])
            self.assertEqual(proc.returncode, 2)
            self.assertIn("line 1", proc.stderr)
            self.assertFalse(os.path.exists(out))


class Grading(unittest.TestCase):
    def test_base_model_responses_are_well_formed_and_score_low(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "items.jsonl")
            proc = run(["grader/generate.py", "--checkpoint", BASE, "--eval-dir", "eval", "--out", out])
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(out) as f:
                rows = [json.loads(line) for line in f]
            self.assertEqual(len(rows), 400)
            self.assertEqual(set(rows[0]), {"id", "split", "instruction", "constraints", "reference", "response"})
            self.assertEqual([r["split"] for r in rows], ["public"] * 200 + ["private"] * 200)
            proc = run(["grader/score.py", "--responses", out])
            self.assertEqual(proc.returncode, 0, proc.stderr)
        result = json.loads(proc.stdout)
        for split in ("public", "private"):
            self.assertTrue(2 <= result[split]["win_rate"] <= 20, result)

    def test_a_context_too_short_for_the_responses_exits_2(self):
        from microlm import GPT, GPTConfig, checkpoint

        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "responses.jsonl")
            small = os.path.join(d, "small")
            checkpoint.save(GPT(GPTConfig(context_len=64, n_layer=1, d_model=32, n_head=2)), small)
            # In this process (a refusal stops before any decoding): the grader's exit status and stderr.
            status, _, stderr = T.run_inline([T.path("grader", "generate.py"), "--checkpoint", small, "--eval-dir", T.path("eval"), "--out", out])
            self.assertEqual(status, 2)
            self.assertIn("context_len", stderr)
            self.assertFalse(os.path.exists(out))

    def test_rollouts_carry_what_the_judge_needs(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.jsonl")
            summary, rows = T.rollouts(self, out, n=16, group_size=4, extra=["--max-new-tokens", "64"])
        self.assertEqual(summary, {"episodes": 16, "out": out})
        self.assertEqual(set(rows[0]), {"prompt_index", "instruction", "constraints", "reference", "prompt", "completion"})
        train = load("data/train.jsonl")
        self.assertEqual(rows[0]["reference"], train[rows[0]["prompt_index"]]["reference"])
        self.assertEqual(rows[0]["prompt"], format_prompt(rows[0]["instruction"]))


class Calibration(unittest.TestCase):
    TOLERANCE = 1  # percentage points: the table rounds to whole per cents

    def test_stated_base_model_figures_are_measured(self):
        sys.path.insert(0, TASK)
        import calibration

        with open(os.path.join(TASK, "instructions.md")) as f:
            text = f.read()
        self.assertIn(
            f"({calibration.GREEDY_ITEMS} seeded instructions greedy, {calibration.SAMPLED_ITEMS} of them sampled "
            f"{calibration.SAMPLES_PER_ITEM} times at temperature 1,",
            " ".join(text.split()),
        )
        measured = calibration.calibrate(os.path.join(TASK, "model"), os.path.join(TASK, "data", "train.jsonl"))
        g, s = measured["greedy"], measured["sampled"]
        expected = {
            "wins against the reference": (g["wins"], s["wins"]),
            "ties with the reference": (g["ties"], s["ties"]),
            "obeys all its constraints": (g["all_obeyed"], s["all_obeyed"]),
            "constraints obeyed, of all stated": (g["constraints_obeyed"], s["constraints_obeyed"]),
            "stops": (g["stops"], s["stops"]),
            "groups of 8 samples with at least one win": (None, s["groups_with_a_win"]),
        }
        assert_stated_figures(self, text, expected, self.TOLERANCE)


if __name__ == "__main__":
    unittest.main()
