"""Checks of micro-alfworld that run in well under a minute on a CPU.

    /usr/bin/python3 tasks/micro-alfworld/tests/test_micro_alfworld.py

Builds its own library folder (symlinks microlm and micro_alfworld, as the sandbox mounts them;
microlm.testing), so no PYTHONPATH is needed. What every task must do (grader determinism and
refusals, rollouts, generate.py, oracle replay) is checked by tasks/contract_test.py.
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

import torch  # noqa: E402

from microlm import checkpoint, episodes  # noqa: E402
import micro_alfworld  # noqa: E402
from micro_alfworld import MAX_NEW_TOKENS, MAX_STEPS, TASK_TYPES, format_prompt, make_env  # noqa: E402

sys.path.insert(0, TASK)  # expert.py sits at the task root, outside the agent-visible env package
from expert import expert  # noqa: E402

BASE = T.base
torch.set_num_threads(1)
run, load = T.run, T.load


def play_expert(game):
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)
    trace = [obs]
    for _ in range(MAX_STEPS):
        action = expert(obs)
        assert action in info["admissible"], (obs, action, info["admissible"])
        obs, reward, done, info = env.step(action)
        trace += [action, obs]
        if done:
            return info["success"], reward, trace
    return False, 0.0, trace


class Env(unittest.TestCase):
    def test_expert_solves_every_game(self):
        for rel in ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl"):
            for game in load(rel):
                success, reward, trace = play_expert(game)
                self.assertTrue(success, (rel, trace))
                self.assertEqual(reward, 1.0)
                self.assertTrue(all(len(o) <= 160 for o in trace[::2]), trace)

    def test_api_and_determinism(self):
        game = load("data/train.jsonl")[2]
        a, b = make_env(), make_env()
        self.assertEqual(a.reset(game["seed"], options=game), b.reset(game["seed"], options=game))
        obs, info = a.reset(game["seed"], options=game)
        self.assertEqual(info["task_type"], game["task_type"])
        self.assertIn("search", info["admissible"])
        self.assertEqual(play_expert(game), play_expert(game))
        self.assertTrue(hasattr(micro_alfworld, "MAX_STEPS") and MAX_NEW_TOKENS >= len("go coffeetable"))

    def test_invalid_actions_and_their_streak(self):
        env = make_env()
        game = {"seed": 5, "task_type": "pick_heat_then_place", "object": "mug", "destination": "shelf"}
        obs, _ = env.reset(5, options=game)
        for k, action in enumerate(["", "dance wildly", "take", "heat", "go moon"]):
            obs, reward, done, info = env.step(action)
            self.assertTrue(obs.startswith("Nothing happens. at: room | "), obs)
            self.assertEqual(done, k == 4)
            self.assertIn("admissible", info)
        self.assertFalse(info["success"])

    def test_wrong_put_ends_the_episode(self):
        for task_type in TASK_TYPES:
            game = {"seed": 11, "task_type": task_type, "object": "mug", "destination": "shelf" if task_type != "look_at_obj_in_light" else "desk"}
            env = make_env()
            obs, info = env.reset(11, options=game)
            while expert(obs) != "take":
                obs, _, _, info = env.step(expert(obs))
            obs, _, done, info = env.step("take")
            at = micro_alfworld.parse(obs)["at"]
            if task_type in ("pick_and_place", "pick_two_obj_and_place") and at == "shelf":
                continue
            obs, reward, done, info = env.step("put")
            self.assertTrue(done and not info["success"] and reward == 0.0, (task_type, obs))
            self.assertTrue(obs.startswith("You failed."))

    def test_env_package_exposes_no_expert(self):
        self.assertFalse(hasattr(micro_alfworld, "expert"))
        self.assertNotIn("expert", micro_alfworld.__all__)
        for name, text in T.env_sources().items():
            self.assertNotIn("expert", text.lower(), name)

    def test_step_cap(self):
        env = make_env()
        obs, info = env.reset(3)
        for k in range(MAX_STEPS):
            obs, _, done, info = env.step("go fridge" if k % 2 else "go microwave")
        self.assertTrue(done)
        self.assertFalse(info["success"])


class Task(unittest.TestCase):
    def test_evaluation_is_held_out(self):
        combo = lambda g: (g["task_type"], g["object"], g["destination"])
        train = load("data/train.jsonl")
        held = load("eval/public.jsonl") + load("eval/private.jsonl")
        self.assertFalse({combo(g) for g in train} & {combo(g) for g in held})
        self.assertFalse({g["seed"] for g in train} & {g["seed"] for g in held})
        self.assertEqual({g["task_type"] for g in held}, set(TASK_TYPES))

    def test_rollouts_and_oracle_round(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.jsonl")
            summary, rows = T.rollouts(self, out, n=32, group_size=8)
            self.assertEqual(len({r["game_index"] for r in rows}), 4)
            self.assertTrue(all(isinstance(r["success"], bool) and r["steps"] for r in rows))
            # One short oracle round on these rollouts (plus an expert episode, so that there is a success).
            game = load("data/train.jsonl")[0]
            success, _, trace = play_expert(game)
            steps = [{"observation": o, "action": a, "reward": 0.0, "done": False} for o, a in zip(trace[0::2], trace[1::2])]
            with open(out, "a") as f:
                f.write(json.dumps({"game_index": -1, "seed": game["seed"], "steps": steps, "success": True, "length": len(steps)}) + "\n")
            proc = run(["oracle/rl_train.py", "--base", BASE, "--rollouts", out, "--data", "data/train.jsonl",
                        "--out", os.path.join(d, "ft"), "--min-steps", "3", "--max-steps", "3", "--check-games", "6"])
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("greedy success", proc.stdout)
            checkpoint.load(os.path.join(d, "ft"))

    def test_episodes_with_the_expert_as_a_model_free_check(self):
        games = load("eval/public.jsonl")[:12]
        records = [play_expert(g) for g in games]
        self.assertTrue(all(success for success, _, _ in records))
        self.assertEqual(episodes.summarize([{"task_type": g["task_type"], "success": True, "return": 1.0, "length": 1} for g in games])["score"], 100.0)


class BaseModelFigures(unittest.TestCase):
    # Figures are stated as whole percentages: half a point of rounding, plus slack for another BLAS build's rounding.
    TOLERANCE = 1.5

    def test_stated_base_model_figures_are_measured(self):
        import calibration

        with open(os.path.join(TASK, "instructions.md")) as f:
            text = f.read()
        self.assertIn(
            f"({calibration.GREEDY_GAMES} seeded games greedy, "
            f"{calibration.SAMPLED_GAMES * calibration.GROUP_SIZE} episodes sampled at temperature 1 as `launch_rollouts` "
            f"samples them: {calibration.SAMPLED_GAMES} games, {calibration.GROUP_SIZE} episodes each)",
            " ".join(text.split()),
        )
        measured = calibration.calibrate(BASE, T.path("data/train.jsonl"))
        g, s = measured["greedy"], measured["sampled"]
        expected = {
            "succeeds": (g["success"], s["success"]),
            **{f"succeeds, {t}": (g["success_by_type"][t], s["success_by_type"][t]) for t in TASK_TYPES},
            "picks up the goal object": (g["takes_the_goal_object"], s["takes_the_goal_object"]),
            "puts it down again at once, where it found it": (g["puts_it_down_at_once"], s["puts_it_down_at_once"]),
            "groups of 8 episodes with at least one success": (None, s["groups_with_a_success"]),
        }
        assert_stated_figures(self, text, expected, self.TOLERANCE)


if __name__ == "__main__":
    unittest.main()
