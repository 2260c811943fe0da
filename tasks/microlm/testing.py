"""Helpers for the tasks' unittest files (tasks/<id>/tests/test_*.py) and tasks/contract_test.py.

    import os, sys
    TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.dirname(TASK))   # tasks/, for microlm
    from microlm.testing import TaskDir
    T = TaskDir(TASK)                           # builds the library folder and puts it first on sys.path
    import micro_x                              # the task's env package, as the sandbox mounts it

TaskDir reads the task's task.json (task.template.json in tasks/_template) and builds a temporary
library folder holding `microlm` and the env package as symlinks, laid out like /workspace/lib in
the sandbox, so that no PYTHONPATH is needed. T.run(args) runs `python3 ARGS` in the task's folder
with that folder as PYTHONPATH and one thread per pool; T.rollouts(...) runs the rollout command
as the server runs it.
"""

import atexit
import contextlib
import io
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile

LIBRARY = os.path.dirname(os.path.abspath(__file__))
SPEC_FILES = ("task.json", "task.template.json")


def read_spec(task_dir):
    """The task's declaration: task.json, or task.template.json for the template."""
    for name in SPEC_FILES:
        path = os.path.join(task_dir, name)
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
    raise FileNotFoundError(f"{task_dir} holds neither of {SPEC_FILES}")


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class TaskDir:
    """One task's folder, with a library folder for its subprocesses (see the module docstring)."""

    def __init__(self, task_dir, on_path=True):
        self.dir = os.path.abspath(task_dir)
        self.spec = read_spec(self.dir)
        self.id = self.spec["id"]
        self.package = self.spec["env"]["package"]
        self.base = os.path.join(self.dir, self.spec["baseModel"])
        self.lib = tempfile.mkdtemp(prefix="a2rl-lib-")
        atexit.register(shutil.rmtree, self.lib, True)
        os.symlink(LIBRARY, os.path.join(self.lib, "microlm"))
        os.symlink(os.path.join(self.dir, self.spec["env"]["dir"]), os.path.join(self.lib, self.package))
        if on_path:
            sys.path.insert(0, self.lib)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def load(self, rel):
        """The JSON lines of a file of the task, e.g. load("data/train.jsonl")."""
        return load_jsonl(self.path(rel))

    def env_sources(self):
        """{path: text} of the env package's Python files: what the agent can read of the environment."""
        sources = {}
        for root, _, names in os.walk(self.path(self.spec["env"]["dir"])):
            for name in sorted(names):
                if name.endswith(".py"):
                    with open(os.path.join(root, name)) as f:
                        sources[os.path.relpath(os.path.join(root, name), self.dir)] = f.read()
        return sources

    def env(self):
        return dict(os.environ, PYTHONPATH=self.lib, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

    def run(self, args, cwd=None, **kwargs):
        """`python3 ARGS` in the task's folder (or cwd), the library folder as PYTHONPATH; a CompletedProcess."""
        return subprocess.run([sys.executable] + list(args), cwd=cwd or self.dir, env=self.env(), capture_output=True, text=True, **kwargs)

    def run_inline(self, args):
        """`python3 ARGS` run in this process, for runs that stop at their argument checks (--help, bad flags):
        no new interpreter, no second torch import. Returns (exit status, stdout, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.path.insert(0, self.lib)
        status = 0
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                if args[0] == "-m":
                    sys.argv = list(args[1:])
                    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
                else:
                    sys.argv = list(args)
                    runpy.run_path(args[0], run_name="__main__")
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else int(e.code is not None)
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
        return status, out.getvalue(), err.getvalue()

    def start(self, args, cwd=None):
        """Like run, but returns the running Popen (stdout and stderr piped, text): for runs side by side."""
        return subprocess.Popen([sys.executable] + list(args), cwd=cwd or self.dir, env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def rollouts_args(self, out, n, group_size, seed=3, checkpoint=None, extra=()):
        """The server's rollout command line (src/rollouts.ts) for the base model on the rollout data."""
        return ["-m", f"{self.package}.rollouts", "--checkpoint", checkpoint or self.base,
                "--data", self.path(self.spec["rollouts"]["data"]), "--n", str(n), "--group-size", str(group_size),
                "--temperature", "1.0", "--seed", str(seed), "--out", out, *extra]

    def rollouts(self, test, out, n=16, group_size=4, seed=3, extra=()):
        """Runs the rollout command, asserts it succeeded (on the unittest.TestCase `test`); returns (summary, rows)."""
        proc = self.run(self.rollouts_args(out, n, group_size, seed, extra=extra))
        test.assertEqual(proc.returncode, 0, proc.stderr)
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        return summary, load_jsonl(out)


STATED_FIGURE_ROW = re.compile(r"^  \| (.+?)(?: \([^|]*\))? \| (?:(\d+)%)? ?\| (\d+)% \|$", re.M)


def assert_stated_figures(test, text, expected, tolerance):
    """Checks an instructions.md table of base-model figures against measured ones.

    Rows read `  | label (optional note) | G% | S% |`, greedy G blank where there is none (groups of samples);
    expected maps each label to (greedy or None, sampled) as measured. The rows must be exactly the expected
    labels, and each stated figure within tolerance points of its measurement."""
    rows = {label: (int(greedy) if greedy else None, int(sampled)) for label, greedy, sampled in STATED_FIGURE_ROW.findall(text)}
    test.assertEqual(set(rows), set(expected), "instructions.md's table of base-model figures")
    for label, stated in rows.items():
        test.assertEqual(stated[0] is None, expected[label][0] is None, f"{label}: which figures are stated")
        for what, said, value in zip(("greedy", "sampled"), stated, expected[label]):
            if said is not None:
                test.assertLessEqual(abs(said - value), tolerance, f"{label}, {what}: stated {said}%, measured {value}%")
