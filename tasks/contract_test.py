"""The contract every task in tasks/ keeps, checked for each tasks/*/task.json (tasks/_template has none).

    /usr/bin/python3 tasks/contract_test.py [-v] [-k micro_gsm8k]

One test class per task (Contract_micro_gsm8k, ...), each building a library folder laid out like
the sandbox's /workspace/lib (microlm and the env package, see microlm.testing). For every task:

- task.json declares every field the server's loader (src/tasks.ts) and the README's task table
  (scripts/task-table.mjs) read, and the files it names exist;
- generate.py rewrites the shipped data and eval files byte for byte;
- the grader entry, run as the server runs it (--checkpoint, --eval-dir, --out), grades the shipped
  base model in the form the server reads for the grader's kind; a score grader's result stays within
  BASELINE_TOLERANCE points of figures.baseline in task.json;
- it grades deterministically: two more gradings side by side, on the first DETERMINISM_ITEMS items of
  each split (what varies between runs, such as unseeded sampling or hash order, shows in any slice),
  give the same output byte for byte;
- the grader refuses bad checkpoints with status 2, "invalid checkpoint" on stderr and no output (run in
  this process: a refusal stops before any grading);
- the rollout command, run as launch_rollouts runs it, plays a few episodes on the base model in
  groups, and refuses bad arguments with status 2;
- level 3: calibration.py's sampled figures come from the very episodes launch_rollouts plays (the
  calibration runs in this process, one thread as in the subprocesses);
- each oracle replay (one per route, sft or reward-only) is JSONL of tool calls that submits a checkpoint,
  the files it writes with $file exist in oracle/, and the flags it passes to them are flags they take; a
  reward-only oracle launches rollouts.

Per-task behaviour (reward rules, environments, score ranges of two-phase graders, ...) is checked by
each task's own tests/test_*.py.
"""

import collections
import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import unittest

# One thread in every pool, before torch loads: what runs in this process (refusals, calibration) runs as the
# graders and rollouts do in theirs.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

TASKS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TASKS)

import torch  # noqa: E402

from microlm import GPT, GPTConfig, checkpoint  # noqa: E402
from microlm.splits import FILES  # noqa: E402
from microlm.testing import TaskDir  # noqa: E402

TEMPLATE = os.path.join(TASKS, "_template")
SPLITS = ("public", "private")
# The grader's output file, by kind, as src/grading.ts names it.
OUTPUT_NAME = {"score": "result.json", "execute": "items.jsonl", "judge": "items.jsonl"}
# Fields of an output line, by kind, with their types (src/execution.ts, src/grading.ts).
LINE_FIELDS = {
    "execute": {"id": str, "split": str, "program": str, "entry_point": str, "calls": list, "expected": list},
    "judge": {"id": str, "split": str, "instruction": str, "reference": str, "response": str},
}
# How far (in points) a score grader's grade of the base model may be from figures.baseline: the
# same machine gives the same grade; another CPU or BLAS build may round a few decisions differently.
BASELINE_TOLERANCE = 5.0
# Items of each split in the determinism check's gradings: enough for several batches' worth of decoding paths
# (finished and unfinished rows, episodes of several lengths), few enough to cost little beside the full grading.
DETERMINISM_ITEMS = 12
# What each entry of task.json's "oracles" declares, and the routes an oracle may take (src/tasks/task.ts).
ORACLE_FIELDS = {"route", "replay", "minImprovement", "measured", "compute"}
COMPUTE_FIELDS = {"cpuSeconds", "wallSeconds", "rolloutEpisodes"}
ORACLE_ROUTES = ("sft", "reward-only")
# Every field task.json must have, as "a.b" paths (src/tasks/task.ts's schema, plus the README table's).
REQUIRED = (
    "id title level tier paperTask summary grading metric library env.dir env.package baseModel trainData evalData "
    "rollouts.data rollouts.reward grader.kind grader.entry grader.version grader.timeoutSeconds grader.cpus "
    "grader.memoryMb submission.requiredFiles submission.maxBytes submission.maxFiles jobs.cpus jobs.memoryMb jobs.pids "
    "defaultBudget instructions oracles successMargin figures.baseline.public figures.baseline.private"
).split()


def task_dirs():
    """Every micro task folder: the folders of tasks/ holding a task.json of tier micro, as listTaskIds('micro') finds them.

    Full-tier tasks (issue 17) keep another contract: their data and base model are prepared assets, their
    grader runs in .venv-full; each has its own tests/.
    """
    def tier(path):
        with open(path) as f:
            return json.load(f).get("tier")

    return [os.path.dirname(p) for p in sorted(glob.glob(os.path.join(TASKS, "*", "task.json"))) if tier(p) != "full"]


def lookup(spec, dotted):
    for key in dotted.split("."):
        if not isinstance(spec, dict) or key not in spec:
            return None
        spec = spec[key]
    return spec


def key_paths(spec, prefix=""):
    """Every key of a nested JSON object, as "a.b" paths."""
    out = set()
    for key, value in spec.items():
        out.add(prefix + key)
        if isinstance(value, dict):
            out |= key_paths(value, prefix + key + ".")
    return out


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class Contract:
    """The checks of one task; the classes below bind TASK_DIR."""

    TASK_DIR = None

    @classmethod
    def setUpClass(cls):
        cls.T = TaskDir(cls.TASK_DIR, on_path=False)
        cls.spec = cls.T.spec
        cls.kind = cls.spec["grader"]["kind"]
        cls.scratch = tempfile.mkdtemp(prefix=f"contract-{cls.T.id}-")
        # The base model graded on the whole evaluation data, and twice on a slice of it (DETERMINISM_ITEMS of
        # each split), the three side by side (each grader runs one thread), as the server runs graders.
        sliced = os.path.join(cls.scratch, "eval-slice")
        os.mkdir(sliced)
        for split in SPLITS:
            with open(cls.T.path(cls.spec["evalData"], f"{split}.jsonl")) as src, open(os.path.join(sliced, f"{split}.jsonl"), "w") as dst:
                dst.writelines(line for _, line in zip(range(DETERMINISM_ITEMS), src))
        procs = []
        for run, eval_dir in (("whole", cls.T.path(cls.spec["evalData"])), ("slice-a", sliced), ("slice-b", sliced)):
            out_dir = os.path.join(cls.scratch, f"grade-{run}")
            os.mkdir(out_dir)
            out = os.path.join(out_dir, OUTPUT_NAME[cls.kind])
            procs.append((cls.T.start(cls.grader_args(cls.T.base, out, eval_dir), cwd=out_dir), out))
        outputs = []
        for proc, out in procs:
            _, stderr = proc.communicate()
            outputs.append((proc.returncode, stderr, read_bytes(out) if os.path.exists(out) else None))
        cls.output, cls.slice_outputs = outputs[0], outputs[1:]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    @classmethod
    def grader_args(cls, checkpoint_dir, out, eval_dir=None):
        entry = cls.T.path("grader", cls.spec["grader"]["entry"])
        return [entry, "--checkpoint", checkpoint_dir, "--eval-dir", eval_dir or cls.T.path(cls.spec["evalData"]), "--out", out]

    def scratch_dir(self, name):
        path = os.path.join(self.scratch, name)
        os.makedirs(path)
        return path

    def test_task_json_declares_everything_and_its_files_exist(self):
        missing = [field for field in REQUIRED if lookup(self.spec, field) is None]
        self.assertFalse(missing, f"task.json lacks {missing}")
        self.assertEqual(self.spec["id"], os.path.basename(self.T.dir))
        self.assertIn(self.kind, OUTPUT_NAME)
        self.assertIn(self.spec["rollouts"]["reward"], ("sandbox", "judge"))
        for name in ("public", "private"):
            self.assertIsInstance(self.spec["figures"]["baseline"][name], (int, float))
        oracles = self.spec["oracles"]
        self.assertTrue(oracles, "task.json lists no oracle")
        for oracle in oracles:
            self.assertEqual(set(oracle), ORACLE_FIELDS, oracle)
            self.assertEqual(set(oracle["compute"]), COMPUTE_FIELDS, oracle)
            self.assertIn(oracle["route"], ORACLE_ROUTES)
        self.assertEqual(len({o["route"] for o in oracles}), len(oracles), "one oracle per route")
        paths = [os.path.join(TASKS, self.spec["library"]), self.T.path(self.spec["env"]["dir"], "__init__.py"),
                 self.T.path(self.spec["env"]["dir"], "rollouts.py"), self.T.path(self.spec["rollouts"]["data"]),
                 self.T.path("grader", self.spec["grader"]["entry"]), self.T.path(self.spec["instructions"]),
                 *[self.T.path(o["replay"]) for o in self.spec["oracles"]], self.T.path("generate.py"), self.T.path("pretrain.py"),
                 self.T.path("README.md")]
        paths += [self.T.path(self.spec["evalData"], f"{split}.jsonl") for split in SPLITS]
        paths += [self.T.path(self.spec["baseModel"], name) for name in self.spec["submission"]["requiredFiles"]]
        if self.kind == "judge":
            paths.append(self.T.path("grader", self.spec["grader"]["judge"]))
        for path in paths:
            self.assertTrue(os.path.exists(path), f"{path} is missing")
        checkpoint.load(self.T.base)

    def test_generate_rewrites_the_shipped_files(self):
        out = self.scratch_dir("generated")
        proc = self.T.run(["generate.py", "--out-dir", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        written = sorted(os.path.relpath(os.path.join(root, name), out) for root, _, names in os.walk(out) for name in names)
        self.assertTrue(set(FILES) <= set(written), written)
        for rel in written:
            self.assertEqual(read_bytes(os.path.join(out, rel)), read_bytes(self.T.path(rel)), f"generate.py changed {rel}")

    def test_grader_grades_the_base_model_deterministically(self):
        for code, stderr, out in (self.output, *self.slice_outputs):
            self.assertEqual(code, 0, stderr)
            self.assertIsNotNone(out, f"the grader wrote no {OUTPUT_NAME[self.kind]}")
        (_, _, out_a), (_, _, out_b) = self.slice_outputs
        self.assertEqual(out_a, out_b, "two gradings of the same checkpoint on the same items differ")

    def test_grader_output_has_the_form_the_server_reads(self):
        code, stderr, text = self.output
        self.assertEqual(code, 0, stderr)
        self.assertIsNotNone(text)
        if self.kind == "score":
            result = json.loads(text)
            for split in SPLITS:
                score = result[split]["score"]
                self.assertTrue(isinstance(score, (int, float)) and 0 <= score <= 100, result)
                figure = self.spec["figures"]["baseline"][split]
                self.assertLessEqual(
                    abs(score - figure), BASELINE_TOLERANCE,
                    f"the base model grades {score} on {split}, task.json's figures.baseline says {figure}: "
                    f"update the figure and run `node scripts/task-table.mjs`",
                )
            return
        lines = [json.loads(line) for line in text.decode().splitlines()]
        for line in lines:
            for field, kind in LINE_FIELDS[self.kind].items():
                self.assertIsInstance(line.get(field), kind, (field, line))
            self.assertIn(line["split"], SPLITS)
        for split in SPLITS:
            expected = len(self.T.load(os.path.join(self.spec["evalData"], f"{split}.jsonl")))
            self.assertEqual(sum(line["split"] == split for line in lines), expected, split)

    def test_grader_refuses_bad_checkpoints(self):
        empty = self.scratch_dir("empty")
        diverged = self.scratch_dir("diverged")
        model = GPT(GPTConfig(context_len=256, n_layer=1, n_head=2, d_model=32))
        with torch.no_grad():
            model.tok_emb.weight[0, 0] = float("nan")
        checkpoint.save(model, diverged)
        for case in (empty, diverged):
            out = os.path.join(self.scratch_dir(f"bad-{os.path.basename(case)}"), OUTPUT_NAME[self.kind])
            status, _, stderr = self.T.run_inline(self.grader_args(case, out))
            self.assertEqual(status, 2, (case, stderr))
            self.assertIn("invalid checkpoint", stderr, case)
            self.assertFalse(os.path.exists(out), f"the grader wrote {out} for a bad checkpoint")

    def test_rollouts_play_on_the_base_model(self):
        out = os.path.join(self.scratch_dir("rollouts"), "batch-001.jsonl")
        summary, rows = self.T.rollouts(self, out, n=8, group_size=4)
        self.assertEqual(summary["episodes"], 8)
        self.assertEqual(len(rows), 8)
        key = "game_index" if "game_index" in rows[0] else "prompt_index"  # the item a row played
        groups = collections.Counter(r[key] for r in rows)
        self.assertEqual(sorted(groups.values()), [4, 4], f"{key}: 8 episodes in groups of 4 are 2 items, 4 times each")
        for row in rows:
            if self.spec["rollouts"]["reward"] == "judge":
                for field in ("instruction", "reference", "completion"):
                    self.assertIsInstance(row.get(field), str, (field, row))
            else:
                self.assertIsInstance(row.get("return", row.get("reward")), (int, float), row)
        status, _, stderr = self.T.run_inline(self.T.rollouts_args(out, 7, 4))  # --n not a multiple of --group-size
        self.assertEqual(status, 2, stderr)
        self.assertIn("error:", stderr)

    def test_level3_calibration_samples_what_launch_rollouts_samples(self):
        """Level 3's calibration.py (microlm.calibration): its sampled figures come from the episodes launch_rollouts plays."""
        if self.spec["level"] != 3:
            self.skipTest("levels 1 and 2 sample with microlm.sampling, as their rollouts do")
        from microlm.calibration import GROUP_SIZE, SEED

        out = os.path.join(self.scratch_dir("calibration"), "batch-001.jsonl")
        _, rows = self.T.rollouts(self, out, n=4 * GROUP_SIZE, group_size=GROUP_SIZE, seed=SEED)
        measured = self.task_module("calibration").calibrate(self.T.base, self.T.path("data", "train.jsonl"), greedy_games=1, sampled_games=4)
        self.assertEqual(measured["sampled"]["success"], round(100.0 * sum(r["success"] for r in rows) / len(rows), 1))

    def task_module(self, name):
        """The task's NAME.py imported in this process, with the library folder on sys.path (each task's under its own name)."""
        sys.path.insert(0, self.T.lib)
        try:
            spec = importlib.util.spec_from_file_location(f"{self.T.package}_{name}", self.T.path(f"{name}.py"))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(self.T.lib)
        return module

    def test_oracle_replays_are_well_formed(self):
        for oracle in self.spec["oracles"]:
            with self.subTest(route=oracle["route"]):
                self.check_replay(self.T.path(oracle["replay"]), oracle["route"])

    def check_replay(self, replay, route):
        oracle_dir = os.path.dirname(replay)
        with open(replay) as f:
            calls = [json.loads(line) for line in f if line.strip()]
        self.assertTrue(calls)
        for call in calls:
            self.assertIsInstance(call, dict)
            self.assertIsInstance(call.get("tool"), str, call)
        self.assertIn("submit_artifact", [c["tool"] for c in calls])
        if route == "reward-only":
            # Its learning signal is the reward of its own episodes.
            self.assertIn("launch_rollouts", [c["tool"] for c in calls])
        scripts = {}  # workspace path -> file in oracle/
        for call in calls:
            content = call.get("arguments", {}).get("content")
            if isinstance(content, dict) and "$file" in content:
                source = os.path.join(oracle_dir, content["$file"])
                self.assertTrue(os.path.exists(source), f"$file {content['$file']} is not in {oracle_dir}")
                scripts[call["arguments"]["path"]] = source
        flags = {}  # file in oracle/ -> flags the replay passes to it
        for call in calls:
            if call["tool"] == "run_training":
                argv = shlex.split(call["arguments"]["command"])
                script = next((a for a in argv if a in scripts), None)
                self.assertIsNotNone(script, f"{argv} runs none of the scripts the replay writes ({sorted(scripts)})")
                flags.setdefault(scripts[script], set()).update(a.split("=")[0] for a in argv if a.startswith("--"))
        for source, used in flags.items():
            status, stdout, stderr = self.T.run_inline([source, "--help"])
            self.assertEqual(status, 0, stderr)
            known = set(re.findall(r"--[a-z][a-z0-9-]*", stdout))
            self.assertFalse(used - known, f"the replay passes {sorted(used - known)} to {source}, which takes {sorted(known)}")


for _dir in task_dirs():
    _name = "Contract_" + os.path.basename(_dir).replace("-", "_")
    globals()[_name] = type(_name, (Contract, unittest.TestCase), {"TASK_DIR": _dir})


class Template(unittest.TestCase):
    """tasks/_template stays a template: no task to the server, declaring every field the tasks declare."""

    def test_template_is_not_a_task_and_declares_every_field(self):
        self.assertNotIn(TEMPLATE, task_dirs())
        self.assertFalse(os.path.exists(os.path.join(TEMPLATE, "task.json")))
        with open(os.path.join(TEMPLATE, "task.template.json")) as f:
            template = key_paths(json.load(f))
        self.assertFalse([f for f in REQUIRED if f not in template], "the template lacks required fields")
        for task_dir in task_dirs():
            with open(os.path.join(task_dir, "task.json")) as f:
                fields = key_paths(json.load(f))
            self.assertFalse(fields - template, f"{os.path.basename(task_dir)} declares fields the template lacks")


class Contract_template_copy(Contract, unittest.TestCase):
    """The contract on a copy of tasks/_template made into a task, as its README says: the skeleton works as it is."""

    @classmethod
    def setUpClass(cls):
        cls.copy_root = tempfile.mkdtemp(prefix="contract-template-")
        with open(os.path.join(TEMPLATE, "task.template.json")) as f:
            task_id = json.load(f)["id"]
        cls.TASK_DIR = os.path.join(cls.copy_root, task_id)
        shutil.copytree(TEMPLATE, cls.TASK_DIR, ignore=shutil.ignore_patterns("__pycache__", "data", "eval", "model"))
        os.rename(os.path.join(cls.TASK_DIR, "task.template.json"), os.path.join(cls.TASK_DIR, "task.json"))
        copy = TaskDir(cls.TASK_DIR, on_path=False)
        for args in (["generate.py"], ["pretrain.py", "--steps", "5"]):  # a few steps: a base model that knows nothing yet
            proc = copy.run(args)
            if proc.returncode:
                shutil.rmtree(cls.copy_root, ignore_errors=True)
                raise RuntimeError(f"template {args[0]} failed: {proc.stderr}")
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.copy_root, ignore_errors=True)

    def test_the_template_tests_pass(self):
        name = "test_" + self.spec["id"].replace("-", "_") + ".py"
        proc = self.T.run([os.path.join("tests", name)])
        self.assertEqual(proc.returncode, 0, proc.stderr)


if __name__ == "__main__":
    unittest.main()
