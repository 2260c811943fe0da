"""Checks of micro-humaneval that run in seconds on a CPU.

    /usr/bin/python3 tasks/micro-humaneval/tests/test_micro_humaneval.py

Builds its own library folder (symlinks microlm and micro_humaneval, as the sandbox
mounts them; microlm.testing), so no PYTHONPATH is needed. What every task must do
(grader determinism and refusals, rollouts, generate.py, oracle replay) is checked by
tasks/contract_test.py. The hostile programs below are run the
way rollouts and grader/score.py run programs (run_programs: resource limits, wall
clock, process group killed); in production the grader adds a sandbox.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(TASK))  # tasks/, for microlm
from microlm.testing import TaskDir, assert_stated_figures  # noqa: E402

T = TaskDir(TASK)
sys.path.insert(0, TASK)

import generate  # noqa: E402  (the task's data generator)

from micro_humaneval import build_program, format_completion, format_prompt, truncate_completion  # noqa: E402
from micro_humaneval.execute import compare, json_equal, parse_outputs, run_programs, run_tests  # noqa: E402

BASE = T.base
SPLITS = ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl")
run, load = T.run, T.load


def combination(item):
    """(family, docstring wording, function name, constant) of an item, recovered from its text."""
    fam = next(f for f in generate.FAMILIES if f["name"] == item["family"])
    args = re.match(r"def \w+\((.*)\):", item["prompt"]).group(1).split(", ")
    doc = item["prompt"].split('"""')[1]
    for d, template in enumerate(fam["docs"]):
        for k in fam["consts"] or [None]:
            body = "    " + generate.fill(fam["body"], *args, k=k) + "\n"
            if generate.fill(template, *args, k=k) == doc and body == item["canonical_solution"]:
                return fam["name"], d, item["entry_point"], k
    raise AssertionError(f"item matches no template: {item['task_id']}")


class Format(unittest.TestCase):
    def test_truncation(self):
        self.assertEqual(truncate_completion("    return x + 7\n"), "    return x + 7\n")
        self.assertEqual(truncate_completion("    return x + 7\ndef g():\n    pass\n"), "    return x + 7\n")
        self.assertEqual(truncate_completion("    y = x\n\n    return y\nprint(1)"), "    y = x\n\n    return y\n")
        self.assertEqual(truncate_completion("\treturn x\n  \nassert f(1)"), "\treturn x\n  \n")
        self.assertEqual(truncate_completion("return x"), "")
        self.assertEqual(truncate_completion("    return x"), "    return x")
        item = load("data/train.jsonl")[0]
        self.assertEqual(format_prompt(item), item["prompt"])
        self.assertEqual(format_completion(item), item["canonical_solution"])
        self.assertEqual(build_program("def f(x):\n", "    return x\nf(1)\n"), "def f(x):\n    return x\n")

    def test_json_equal_and_compare(self):
        self.assertTrue(json_equal([1, "a", None, [True]], [1, "a", None, [True]]))
        self.assertTrue(json_equal(2, 2.0))
        self.assertFalse(json_equal(True, 1))
        self.assertFalse(json_equal(0, False))
        self.assertFalse(json_equal([1], [1, 1]))
        self.assertFalse(json_equal("1", 1))
        self.assertFalse(json_equal(None, []))
        ok = [{"ok": True, "value": 3}, {"ok": True, "value": True}, {"ok": False, "error": "x"}]
        self.assertEqual(compare(ok, [3, True, None]), 2)
        self.assertEqual(compare(ok, [3, 1, None]), 1)
        self.assertEqual(compare(ok[:2], [3, True, None]), 0)  # wrong length passes nothing
        self.assertEqual(compare(None, [3]), 0)
        self.assertEqual(compare([{"value": 3}], [3]), 0)  # "ok" must be true
        text = 'noise\nA2RL_OUTPUTS [{"ok": true, "value": 1}]\nA2RL_OUTPUTS [{"ok": true, "value": 2}]\n'
        self.assertEqual(parse_outputs(text, 1), [{"ok": True, "value": 2}])  # the last line counts
        self.assertIsNone(parse_outputs(text, 2))
        self.assertIsNone(parse_outputs('A2RL_OUTPUTS [{"ok": true, "value": NaN}]', 1))
        self.assertIsNone(parse_outputs("nothing", 1))


class Data(unittest.TestCase):
    def test_items_are_well_formed_and_splits_disjoint(self):
        splits = {rel: load(rel) for rel in SPLITS}
        self.assertEqual([len(v) for v in splits.values()], [generate.N_TRAIN, generate.N_PUBLIC, generate.N_PRIVATE])
        prompts = [it["prompt"] for items in splits.values() for it in items]
        self.assertEqual(len(prompts), len(set(prompts)))
        for items in splits.values():
            for it in items:
                self.assertTrue(it["prompt"].startswith(f"def {it['entry_point']}("), it)
                self.assertEqual(len(it["tests"]), generate.N_TESTS)
                self.assertLessEqual(len(it["prompt"]), generate.MAX_PROMPT_CHARS)
                # JSON values only: no floats, no tuples (they would not survive JSON anyway)
                self.assertEqual(json.loads(json.dumps(it["tests"])), it["tests"])
                self.assertNotIn("float", json.dumps(it["tests"]))
        train = {combination(it) for it in splits["data/train.jsonl"]}
        for rel in ("eval/public.jsonl", "eval/private.jsonl"):
            held = {combination(it) for it in splits[rel]}
            self.assertFalse(train & held, rel)
        families = {it["family"] for it in splits["eval/public.jsonl"] + splits["eval/private.jsonl"]}
        self.assertEqual(families, {f["name"] for f in generate.FAMILIES})

    def test_canonical_solutions_pass_through_the_runner(self):
        items = load("eval/public.jsonl")[:30] + load("eval/private.jsonl")[:30] + load("data/train.jsonl")[:30]
        jobs = [
            {"program": build_program(it["prompt"], it["canonical_solution"]), "entry_point": it["entry_point"],
             "calls": [t["args"] for t in it["tests"]]}
            for it in items
        ]
        for it, out in zip(items, run_programs(jobs)):
            self.assertEqual(compare(out, [t["expected"] for t in it["tests"]]), len(it["tests"]), (it, out))


def job(program, calls=([1],), entry_point="f"):
    return {"program": program, "entry_point": entry_point, "calls": [list(c) for c in calls]}


class Runner(unittest.TestCase):
    """Ordinary and hostile programs through run_programs, all in one batch to save time."""

    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="micro-humaneval-test-")
        cls.pid_file = os.path.join(cls.scratch, "pids")
        cls.victim = os.path.join(cls.scratch, "victim")
        open(cls.victim, "w").close()
        fake_line = 'A2RL_OUTPUTS [{"ok": true, "value": true}, {"ok": true, "value": true}]\\n'
        cls.cases = {
            "ok": job("def f(x, y):\n    print('noise')\n    return (x + y, [x])\n", [[1, 2], [3, 4]]),
            "mixed": job("def f(x):\n    return 10 // x\n", [[5], [0], ["a"]]),
            "unserialisable": job("def f(x):\n    return {x}\n"),
            "nan": job("def f(x):\n    return float('nan')\n"),
            "syntax": job("def f(x:\n    return x\n", [[1], [2]]),
            "no_entry": job("def g(x):\n    return x\n"),
            "top_level_raise": job("raise SystemExit(0)\ndef f(x):\n    return x\n", [[1], [2]]),
            "infinite_loop": job("def f(x):\n    while True:\n        pass\n", [[1], [2], [3]]),
            "swallowed_timeout": job(
                "def f(x):\n    while True:\n        try:\n            while True:\n                pass\n"
                "        except BaseException:\n            pass\n", [[1], [2]]),
            "top_level_loop": job("while True:\n    pass\n", [[1], [2]]),
            "huge_allocation": job("def f(x):\n    return len(bytearray(10 ** 10))\n"),
            "huge_result": job("def f(x):\n    return 'a' * 10 ** 6\n"),
            "fork_bomb": job("import os\ndef f(x):\n    while True:\n        os.fork()\n"),
            "subprocess": job("import subprocess\ndef f(x):\n    return subprocess.run(['true']).returncode\n"),
            "passwd": job("def f(x):\n    return open('/etc/passwd').read()[:4]\n"),
            "socket": job(
                "import socket\ndef f(x):\n    s = socket.socket()\n    s.settimeout(0.5)\n"
                "    s.connect(('192.0.2.1', 80))\n    return s.recv(4).decode()\n"),
            "delete_files": job(f"import os\ndef f(x):\n    os.remove({cls.victim!r})\n"),
            "fake_line_then_exit": job(
                "import os\nfor fd in range(1, 16):\n    try:\n        os.write(fd, b'" + fake_line + "')\n"
                "    except OSError:\n        pass\nos._exit(0)\ndef f(x):\n    return None\n", [[1], [2]]),
            "fake_line_then_kill": job(
                "import os, signal\nfor fd in range(1, 16):\n    try:\n        os.write(fd, b'" + fake_line + "')\n"
                "    except OSError:\n        pass\nsignal.raise_signal(signal.SIGKILL)\ndef f(x):\n    return None\n",
                [[1], [2]]),
            # A determined program gets a working fork() past the guard; whatever it starts dies with it.
            "forks_past_guard": job(
                "import importlib.machinery, importlib.util\n"
                "spec = importlib.machinery.BuiltinImporter.find_spec('posix')\n"
                "px = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(px)\npids = []\n"
                "for _ in range(3):\n    pid = px.fork()\n    if pid == 0:\n        import time\n        time.sleep(300)\n"
                "    pids.append(pid)\n"
                f"open({cls.pid_file!r}, 'w').write(' '.join(map(str, pids)))\n"
                "def f(x):\n    return x\n"),
        }
        start = time.time()
        cls.outputs = dict(zip(cls.cases, run_programs(list(cls.cases.values()), timeout_s=5, workers=2)))
        cls.elapsed = time.time() - start

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def errors(self, name):
        return [o.get("error", "") for o in self.outputs[name]]

    def test_ordinary_programs(self):
        self.assertEqual(self.outputs["ok"], [{"ok": True, "value": [3, [1]]}, {"ok": True, "value": [7, [3]]}])
        out = self.outputs["mixed"]
        self.assertEqual(out[0], {"ok": True, "value": 2})
        self.assertTrue(out[1]["error"].startswith("ZeroDivisionError"))
        self.assertTrue(out[2]["error"].startswith("TypeError"))
        self.assertTrue(self.errors("unserialisable")[0].startswith("unserialisable"))
        self.assertTrue(self.errors("nan")[0].startswith("unserialisable"))
        self.assertTrue(all(e.startswith("SyntaxError") for e in self.errors("syntax")))
        self.assertTrue(self.errors("no_entry")[0].startswith("NameError"))
        self.assertTrue(all(e.startswith("SystemExit") for e in self.errors("top_level_raise")))

    def test_time_limits(self):
        self.assertEqual(self.errors("infinite_loop")[0][:12], "TimeoutError")
        self.assertEqual([e[:6] for e in self.errors("infinite_loop")[1:]], ["NotRun", "NotRun"])
        self.assertEqual(self.errors("swallowed_timeout")[0][:12], "TimeoutError")
        self.assertTrue(all(e.startswith("TimeoutError") for e in self.errors("top_level_loop")))
        self.assertLess(self.elapsed, 10)  # three 1-second timeouts on two workers, plus start-up

    def test_resource_abuse_fails_gracefully(self):
        self.assertTrue(self.errors("huge_allocation")[0].startswith("MemoryError"))
        self.assertTrue(self.errors("huge_result")[0].startswith("unserialisable"))
        self.assertTrue(self.errors("fork_bomb")[0].startswith("TypeError"))  # os.fork is disabled
        self.assertTrue(self.errors("subprocess")[0].startswith("ModuleNotFoundError"))
        self.assertTrue(self.errors("delete_files")[0].startswith("TypeError"))
        self.assertTrue(os.path.exists(self.victim))
        # Reading files or opening sockets is the grader sandbox's business; here the runner just survives it.
        for name in ("passwd", "socket"):
            self.assertEqual(len(self.outputs[name]), 1)
            self.assertIn("ok", self.outputs[name][0])

    def test_children_are_killed(self):
        self.assertEqual(self.outputs["forks_past_guard"], [{"ok": True, "value": 1}])
        with open(self.pid_file) as f:
            pids = [int(p) for p in f.read().split()]
        self.assertEqual(len(pids), 3)
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                continue
            self.assertIn(state, ("Z", "X"), f"process {pid} is still running")

    def test_fake_output_lines_cannot_pass(self):
        # The fake lines claim success with values the program made up; the expected values
        # never reach the runner, so they do not match (and os._exit is disabled anyway).
        for name in ("fake_line_then_exit", "fake_line_then_kill"):
            self.assertEqual(compare(self.outputs[name], [2, 3]), 0, self.outputs[name])
        self.assertTrue(self.errors("fake_line_then_exit")[0].startswith("TypeError"))

    def test_run_tests_and_command_line(self):
        tests = [{"args": [1], "expected": 8}, {"args": [-7], "expected": 0}, {"args": [0], "expected": True}]
        self.assertAlmostEqual(run_tests("def f(x):\n    return x + 7\n", "f", tests), 2 / 3)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "item.json")
            with open(path, "w") as f:
                program = "import sys\nprint('A2RL_OUTPUTS [1]')\nsys.stderr.write('x')\ndef f(x):\n    return [x, x]\n"
                json.dump(job(program), f)
            proc = run(["-m", "micro_humaneval.execute", path], timeout=30)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stdout, 'A2RL_OUTPUTS [{"ok": true, "value": [1, 1]}]\n')
            self.assertEqual(proc.stderr, "")
            with open(path, "w") as f:
                json.dump({"program": "x", "calls": [[1]]}, f)
            proc = run(["-m", "micro_humaneval.execute", path], timeout=30)
            self.assertEqual((proc.returncode, proc.stdout), (2, ""))


class Grading(unittest.TestCase):
    def test_phase1_records_match_the_problems_and_mostly_fail(self):
        with tempfile.TemporaryDirectory() as d:
            eval_dir = os.path.join(d, "eval")
            os.mkdir(eval_dir)
            for split in ("public", "private"):  # a slice keeps the test fast
                with open(os.path.join(TASK, "eval", f"{split}.jsonl")) as src:
                    lines = src.readlines()[:40]
                with open(os.path.join(eval_dir, f"{split}.jsonl"), "w") as dst:
                    dst.writelines(lines)
            out = os.path.join(d, "items.jsonl")
            proc = run(["grader/generate.py", "--checkpoint", BASE, "--eval-dir", eval_dir, "--out", out])
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(out) as f:
                records = [json.loads(line) for line in f]
        self.assertEqual([r["split"] for r in records], ["public"] * 40 + ["private"] * 40)
        public = load("eval/public.jsonl")[:40]
        for r, it in zip(records, public):
            self.assertEqual(set(r), {"id", "split", "program", "entry_point", "calls", "expected"})
            self.assertEqual(r["id"], it["task_id"])
            self.assertTrue(r["program"].startswith(it["prompt"]))
            self.assertEqual(r["expected"], [t["expected"] for t in it["tests"]])
        # The base model writes bodies that run but are mostly wrong.
        outputs = run_programs(records)
        solved = sum(compare(o, r["expected"]) == len(r["expected"]) for o, r in zip(outputs, records))
        self.assertLess(solved, 0.4 * len(records))


class Rollouts(unittest.TestCase):
    def test_rollouts_are_scored_by_their_tests(self):
        with tempfile.TemporaryDirectory() as d:
            summary, rows = T.rollouts(self, os.path.join(d, "r.jsonl"), n=16, group_size=4)
        for r in rows:
            self.assertEqual(set(r), {"prompt_index", "prompt", "completion", "reward", "passed", "total"})
            self.assertAlmostEqual(r["reward"], r["passed"] / r["total"])
        self.assertAlmostEqual(summary["mean_reward"], sum(r["reward"] for r in rows) / 16, places=4)


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
            "program parses": (g["parses"], s["parses"]),
            "passes every test": (g["pass"], s["pass"]),
            **{f"passes, {kind}": (g["pass_by_kind"][kind], s["pass_by_kind"][kind]) for kind in calibration.KINDS},
            "groups of 8 samples with at least one pass": (None, s["groups_with_a_pass"]),
        }
        assert_stated_figures(self, text, expected, self.TOLERANCE)


if __name__ == "__main__":
    unittest.main()
