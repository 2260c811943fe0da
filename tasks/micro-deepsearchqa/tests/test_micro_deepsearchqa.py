"""Checks of micro-deepsearchqa that run in well under a minute on a CPU.

    /usr/bin/python3 tasks/micro-deepsearchqa/tests/test_micro_deepsearchqa.py

Builds its own library folder (symlinks microlm and micro_deepsearchqa, as the sandbox
mounts them), so no PYTHONPATH is needed.
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TASK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = tempfile.mkdtemp(prefix="a2rl-lib-")
atexit.register(shutil.rmtree, LIB)
os.symlink(os.path.join(os.path.dirname(TASK), "microlm"), os.path.join(LIB, "microlm"))
os.symlink(os.path.join(TASK, "env"), os.path.join(LIB, "micro_deepsearchqa"))
sys.path.insert(0, LIB)
sys.path.insert(1, TASK)  # expert.py: task root only, not in the sandbox-mounted env package

import micro_deepsearchqa as pkg  # noqa: E402
from micro_deepsearchqa import MAX_STEPS, corpus, make_env  # noqa: E402
from expert import critical, expert  # noqa: E402

BASE = os.path.join(TASK, "model")


def run(args):
    env = dict(os.environ, PYTHONPATH=LIB)
    return subprocess.run([sys.executable] + args, cwd=TASK, env=env, capture_output=True, text=True)


def load(rel):
    with open(os.path.join(TASK, rel)) as f:
        return [json.loads(line) for line in f if line.strip()]


def play(game, policy):
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)
    trace = [(obs, info)]
    for _ in range(MAX_STEPS):
        obs, reward, done, info = env.step(policy(obs))
        trace.append((obs, info))
        if done:
            return reward, info, trace
    return 0.0, info, trace


class Env(unittest.TestCase):
    def test_env_package_does_not_expose_an_expert(self):
        self.assertFalse(hasattr(pkg, "expert"))
        self.assertFalse(hasattr(pkg.game, "expert"))
        self.assertFalse(hasattr(pkg.game, "critical"))
        self.assertNotIn("expert", pkg.__all__)
        for root, _, files in os.walk(os.path.join(TASK, "env")):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(root, name)) as f:
                        text = f.read()
                    self.assertNotIn("def expert", text, name)
                    self.assertNotIn("expert", text.lower(), name)

    def test_expert_solves_every_game_in_two_steps(self):
        for rel in ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl"):
            for game in load(rel):
                reward, info, trace = play(game, expert)
                self.assertEqual(reward, 1.0, (rel, game))
                self.assertTrue(info["success"])
                self.assertEqual(len(trace), 3)
                for obs, info in trace:
                    self.assertLessEqual(len(obs), pkg.game.MAX_OBS_CHARS)
                    self.assertIn("admissible", info)

    def test_habit_rarely_solves(self):
        games = load("eval/public.jsonl")
        habit = lambda obs: critical(obs) or "search[#1]"
        solved = sum(play(g, habit)[0] for g in games)
        self.assertTrue(0.03 * len(games) <= solved <= 0.2 * len(games), solved)

    def test_actions_and_bad_input(self):
        game = load("data/train.jsonl")[0]
        env = make_env()
        obs, info = env.reset(game["seed"], options=game)
        self.assertEqual(info["task_type"], game["type"])
        question = obs.split("\n")[-1]
        self.assertTrue(question.startswith("Q: ") and game["subject"] in question)
        self.assertTrue(obs.startswith(f"R: {game['subject']}: "))
        self.assertIn("search[#1]", info["admissible"])
        for bad in ("", "jump", "search[#99]", "answer[#0]", "\u00e9"):
            obs2, reward, done, info = env.step(bad)
            self.assertFalse(done)
            self.assertEqual(reward, 0.0)
            self.assertIn("Nothing happens.", obs2)
            self.assertTrue(obs2.endswith("\n" + question))
        env = make_env()
        env.reset(game["seed"], options=game)
        obs, _, done, _ = env.step(f"search[{game['subject']}]")
        self.assertIn(f"R: {game['subject']}: ", obs)
        answer = pkg.answer_of(game["type"], game["subject"])
        _, reward, done, info = env.step(f"answer[ {answer.upper()}. ]")
        self.assertTrue(done and info["success"] and reward == 1.0)
        env.reset(game["seed"], options=game)
        for i in range(MAX_STEPS):
            _, _, done, info = env.step("search[#1]")
        self.assertTrue(done)
        self.assertFalse(info["success"])

    def test_reset_is_deterministic_and_seed_only_games_work(self):
        a, b = make_env(), make_env()
        self.assertEqual(a.reset(12345), b.reset(12345))
        self.assertIn(a.task_type, pkg.TYPES)

    def test_search_ranks_the_named_entity_first(self):
        for name in corpus.PEOPLE[:50] + corpus.COMPANIES[:50]:
            self.assertEqual(corpus.search(f"Where is {name}?")[0], name)

    def test_generate_is_reproducible_and_out_of_distribution(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(run(["generate.py", "--out-dir", d]).returncode, 0)
            for rel in ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl"):
                with open(os.path.join(d, rel), "rb") as a, open(os.path.join(TASK, rel), "rb") as b:
                    self.assertEqual(a.read(), b.read(), rel)
        subjects = {rel: {g["subject"] for g in load(rel)} for rel in ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl")}
        self.assertFalse(subjects["data/train.jsonl"] & (subjects["eval/public.jsonl"] | subjects["eval/private.jsonl"]))
        self.assertFalse(subjects["eval/public.jsonl"] & subjects["eval/private.jsonl"])


class Model(unittest.TestCase):
    def test_grader_scores_base_model_deterministically(self):
        with tempfile.TemporaryDirectory() as d:
            scores = []
            for name in ("a.json", "b.json"):
                out = os.path.join(d, name)
                proc = run(["grader/grade.py", "--checkpoint", BASE, "--eval-dir", "eval", "--out", out])
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(out) as f:
                    scores.append(json.load(f))
            self.assertEqual(scores[0], scores[1])
            self.assertTrue(2 <= scores[0]["public"]["score"] <= 30, scores[0])
            self.assertEqual(scores[0]["private"]["total"], 150)

    def test_grader_rejects_bad_checkpoint(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "score.json")
            proc = run(["grader/grade.py", "--checkpoint", d, "--eval-dir", "eval", "--out", out])
            self.assertEqual(proc.returncode, 2)
            self.assertIn("invalid checkpoint", proc.stderr)
            self.assertFalse(os.path.exists(out))

    def test_rollouts(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.jsonl")
            args = ["-m", "micro_deepsearchqa.rollouts", "--checkpoint", BASE, "--data", "data/train.jsonl",
                    "--n", "32", "--group-size", "4", "--seed", "3", "--out", out]
            proc = run(args)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            summary = json.loads(proc.stdout.strip().splitlines()[-1])
            self.assertEqual(summary["episodes"], 32)
            with open(out) as f:
                rows = [json.loads(line) for line in f]
            self.assertEqual(len({r["game_index"] for r in rows}), 8)
            for r in rows:
                self.assertTrue(r["steps"] and isinstance(r["success"], bool))
                self.assertTrue(all(s["action"].startswith(("search[", "answer[")) for s in r["steps"]), r)


if __name__ == "__main__":
    unittest.main()
