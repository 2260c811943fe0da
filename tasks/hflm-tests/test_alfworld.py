"""Tests of alfworld's adapter (hflm.alfworld), its assets and rollouts, and the stand-in against upstream's API.

    .venv-full/bin/python tasks/hflm-tests/test_alfworld.py

UpstreamSurfaceTest pins what hflm.alfworld relies on, as read from the upstream sources (alfworld/alfworld 0.5.0,
alfworld/agents/environment/{__init__,alfred_tw_env}.py; microsoft/TextWorld textworld/gym/envs/textworld_batch.py,
envs/batch/batch_env.py, envs/wrappers/limit.py; RD-Agent autorl_bench benchmarks/alfworld/eval.py): the stand-in
must keep it. A real alfworld on the path is imported first, but the games are the fixture's stand-in games, which
it cannot load: only the name, signature and game-collection tests could pass against it.
"""

import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, HERE)  # for the fixtures
sys.path.append(os.path.join(TASKS, "hflm", "standins"))  # after site-packages: a real alfworld wins

import fixture_smoke_alfworld  # noqa: E402
from hflm import alfworld, assets  # noqa: E402

HUB = HOME = None


def setUpModule():
    global HUB, HOME
    HUB = fixture_smoke_alfworld.write(tempfile.mkdtemp(prefix="alfworld-hub-"))  # alfworld's default games, no other task's
    HOME = tempfile.mkdtemp(prefix="alfworld-home-")
    assets.prepare("alfworld", HOME, fixture_smoke_alfworld.write_tiny_model(HUB), HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def data_root(split="train"):
    base = os.path.join(HOME, "assets", "alfworld")
    return os.path.join(base, "data", "alfworld") if split == "train" else os.path.join(base, "eval", split)


def prompts():
    with open(os.path.join(HOME, "assets", "alfworld", "data", "react_prompts.json")) as f:
        return json.load(f)


class UpstreamSurfaceTest(unittest.TestCase):
    def test_names_and_signatures_are_upstreams(self):
        from alfworld.agents.environment import get_environment
        from alfworld.agents.environment import alfred_tw_env

        self.assertIs(get_environment("AlfredTWEnv"), alfred_tw_env.AlfredTWEnv)
        with self.assertRaises(NotImplementedError):
            get_environment("NoSuchEnv")
        self.assertEqual(alfred_tw_env.TASK_TYPES, {
            1: "pick_and_place_simple", 2: "look_at_obj_in_light", 3: "pick_clean_then_place_in_recep",
            4: "pick_heat_then_place_in_recep", 5: "pick_cool_then_place_in_recep", 6: "pick_two_obj_and_place"})
        init = inspect.signature(alfred_tw_env.AlfredTWEnv.__init__).parameters
        self.assertEqual(list(init)[1:], ["config", "train_eval"])
        self.assertEqual(init["train_eval"].default, "train")
        self.assertEqual(list(inspect.signature(alfred_tw_env.AlfredTWEnv.init_env).parameters)[1:], ["batch_size"])

    def test_collects_games_as_upstream_and_counts_them(self):
        from alfworld.agents.environment import get_environment

        tw_env = get_environment("AlfredTWEnv")(alfworld.config(data_root()), train_eval="train")
        self.assertEqual(tw_env.num_games, 8)
        self.assertTrue(all(f.endswith("/game.tw-pddl") for f in tw_env.game_files))
        config = alfworld.config(data_root())
        config["env"]["task_types"] = [1]
        only_pick = get_environment("AlfredTWEnv")(config, train_eval="train")
        self.assertTrue(0 < only_pick.num_games < 8)
        self.assertTrue(all("pick_and_place_simple" in f for f in only_pick.game_files))

    def test_reset_and_step_return_textworlds_batch_shapes(self):
        env, n = alfworld.open_games(data_root(), "train", limit=3)
        obs, infos = env.reset()
        self.assertIsInstance(obs, tuple)
        self.assertEqual(len(obs), 3)
        self.assertTrue(all(o.startswith("-= Welcome to TextWorld, ALFRED! =-\n\n") and "\n\nYour task is to: " in o for o in obs))
        for key in ("won", "admissible_commands", "extra.gamefile", "extra.expert_plan"):
            self.assertEqual(len(infos[key]), 3, key)
        self.assertEqual(infos["won"], [False] * 3)
        with self.assertRaises(AssertionError):
            env.step("look")  # upstream: "Expected a list of commands."
        obs, scores, dones, infos = env.step(["look", "inventory", "go to nowhere 9"])
        self.assertEqual((type(obs), type(scores), type(dones)), (tuple, tuple, tuple))
        self.assertEqual(obs[2], "Nothing happens.")
        self.assertEqual(obs[1], "You are not carrying anything.")
        self.assertTrue(all(isinstance(c, list) and "look" in c for c in infos["admissible_commands"]))

    def test_game_order_is_textworlds_seeded_shuffle(self):
        from alfworld.agents.environment import get_environment

        tw_env = get_environment("AlfredTWEnv")(alfworld.config(data_root()), train_eval="train")
        env = tw_env.init_env(batch_size=tw_env.num_games)
        _, infos = env.reset()
        expected = list(tw_env.game_files)
        np.random.RandomState(1234).shuffle(expected)  # TextworldBatchGymEnv.seed(1234)
        self.assertEqual(infos["extra.gamefile"], expected)

    def test_expert_plan_only_on_the_train_split(self):
        env, n = alfworld.open_games(os.path.join(data_root("public")), "eval_out_of_distribution")
        _, infos = env.reset()
        self.assertNotIn("extra.expert_plan", infos)
        self.assertEqual(set(infos), {"won", "admissible_commands", "extra.gamefile"})

    def test_the_expert_wins_every_game_and_a_won_game_repeats_its_last_state(self):
        env, n = alfworld.open_games(data_root(), "train")
        obs, infos = env.reset()
        for _ in range(alfworld.MAX_STEPS):
            obs, scores, dones, infos = env.step([p[0] if p else "look" for p in infos["extra.expert_plan"]])
        self.assertEqual(infos["won"], [True] * n)
        self.assertTrue(all(dones))
        self.assertEqual(scores, (1.0,) * n)
        again = env.step(["look"] * n)
        self.assertEqual(again[0], obs)

    def test_a_batch_is_one_process_with_an_env_per_game(self):
        import psutil

        env, n = alfworld.open_games(data_root(), "train")
        before = psutil.Process().children(recursive=True)
        obs, infos = env.reset()
        obs, _, _, infos = env.step(["look"] * n)
        self.assertEqual(psutil.Process().children(recursive=True), before)  # upstream's textworld.gym forks one per game
        self.assertEqual((len(obs), len(set(infos["extra.gamefile"]))), (n, n))

    def test_fifty_steps_end_a_game_that_is_not_won(self):
        env, n = alfworld.open_games(data_root(), "train", limit=1)
        env.reset()
        dones = [env.step(["look"])[2][0] for _ in range(alfworld.MAX_STEPS)]
        self.assertEqual(dones, [False] * 49 + [True])

    def test_a_game_file_of_neither_kind_is_refused_with_what_to_do(self):
        from alfworld.agents.environment.alfred_tw_env import load_game

        with tempfile.NamedTemporaryFile("w", suffix=".tw-pddl", delete=False) as f:
            json.dump({"pddl_domain": "...", "grammar": "...", "pddl_problem": "...", "solvable": True}, f)
        try:
            with self.assertRaisesRegex(ValueError, "neither a stand-in game nor an ALFWorld game.tw-pddl"):
                load_game(f.name)
        finally:
            os.unlink(f.name)


class ReferenceLoopTest(unittest.TestCase):
    def test_prompt_and_history_are_the_references(self):
        seen = []

        def complete(texts):  # a think: action, then look, then think: again
            seen.append(list(texts))
            return [" look\n" if len(seen) == 2 else " think: where is it?"] * len(texts)

        env, n = alfworld.open_games(data_root(), "train", limit=1)
        episode = alfworld.play(env, n, prompts(), complete, max_steps=3)[0]
        key = alfworld.prompt_key(episode["name"])
        self.assertIn(key, {"put", "clean", "heat", "cool", "examine", "puttwo"})
        head = ("Interact with a household to solve a task. Here are two examples.\n"
                + prompts()[f"react_{key}_1"] + prompts()[f"react_{key}_0"] + "\nHere is the task.\n")
        self.assertTrue(seen[0][0].startswith(head + "You are in the middle of a room."))
        self.assertTrue(seen[0][0].endswith("\n>"))
        self.assertEqual(episode["actions"], ["think: where is it?", "look", "think: where is it?"])
        self.assertEqual(episode["observations"][0], "OK.")  # a think: action's observation
        self.assertEqual(seen[1][0], seen[0][0] + " think: where is it?\nOK.\n>")
        self.assertTrue(episode["observations"][1].startswith("You are in the middle of a room."))
        self.assertEqual(episode["steps"], 3)

    def test_task_prefixes_and_names(self):
        self.assertEqual(alfworld.game_name("/d/json_2.1.1/valid_unseen/pick_two_obj_and_place-Pen-None-Bed-3/trial_T1/game.tw-pddl"),
                         "pick_two_obj_and_place-Pen-None-Bed-3/trial_T1")
        for name, key in (("pick_and_place_simple-X", "put"), ("look_at_obj_in_light-X", "examine"),
                          ("pick_clean_then_place_in_recep-X", "clean"), ("pick_two_obj_and_place-X", "puttwo"),
                          ("something_else-X", None)):
            self.assertEqual(alfworld.prompt_key(name), key)
        self.assertEqual(alfworld.process_ob("You arrive at loc 5. On the desk 1, you see nothing."), "On the desk 1, you see nothing.")
        self.assertEqual(alfworld.GENERATION.max_new_tokens, 100)
        self.assertEqual((alfworld.GENERATION.temperature, alfworld.GENERATION.stop, alfworld.GENERATION.chat_template), (0.0, ("\n",), False))


class AssetsTest(unittest.TestCase):
    def test_train_visible_valid_unseen_hidden_and_halved(self):
        base = os.path.join(HOME, "assets", "alfworld")
        self.assertEqual(assets.verify("alfworld", HOME, fixture_smoke_alfworld.TINY_MODEL), [])
        with open(os.path.join(base, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["games"], {"train": 8, "public": 2, "private": 2})
        data_files = [p for p in manifest["files"] if p.startswith("data/")]
        self.assertFalse([p for p in data_files if "valid_unseen" in p])
        halves = {}
        for half in ("public", "private"):
            with open(os.path.join(base, "eval", f"{half}.jsonl")) as f:
                halves[half] = {json.loads(line)["name"] for line in f}
        self.assertFalse(halves["public"] & halves["private"])
        with open(os.path.join(base, "data", "train.jsonl")) as f:
            train = [json.loads(line) for line in f]
        self.assertEqual(len(train), 8)
        self.assertTrue(all(os.path.isfile(os.path.join(base, "data", r["gamefile"])) for r in train))

    def test_a_changed_game_is_found_and_a_missing_prompt_file_refused(self):
        home = tempfile.mkdtemp(prefix="alfworld-home-")
        hub = tempfile.mkdtemp(prefix="alfworld-hub-")
        try:
            shutil.copytree(HUB, hub, dirs_exist_ok=True)
            assets.prepare("alfworld", home, fixture_smoke_alfworld.TINY_MODEL, hub)
            with open(os.path.join(home, "assets", "alfworld", "data", "train.jsonl"), "a") as f:
                f.write("\n")
            self.assertTrue(any("has changed" in p for p in assets.verify("alfworld", home)))
            os.unlink(os.path.join(hub, fixture_smoke_alfworld.PROMPTS))
            with self.assertRaisesRegex(assets.AssetsError, "alfworld_3prompts.json"):
                assets.prepare("alfworld", home, fixture_smoke_alfworld.TINY_MODEL, hub)
        finally:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(hub, ignore_errors=True)


class RolloutsTest(unittest.TestCase):
    def test_episodes_of_train_games_with_rewards(self):
        out_dir = tempfile.mkdtemp(prefix="alfworld-rollouts-")
        try:
            base = os.path.join(HOME, "models", fixture_smoke_alfworld.TINY_MODEL.replace("/", "--"))
            out = os.path.join(out_dir, "batch.jsonl")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([TASKS, os.path.join(TASKS, "hflm", "standins")])}
            done = subprocess.run(
                [sys.executable, "-m", "hflm.rollouts", "--task", "alfworld", "--checkpoint", base, "--base", base,
                 "--data", os.path.join(HOME, "assets", "alfworld", "data", "train.jsonl"), "--n", "4",
                 "--group-size", "2", "--max-new-tokens", "8", "--threads", "1", "--out", out],
                env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(json.loads(done.stdout.strip().splitlines()[-1])["episodes"], 4)
            with open(out) as f:
                lines = [json.loads(line) for line in f]
            self.assertEqual(sorted(line["group"] for line in lines), [0, 0, 1, 1])
            for line in lines:
                self.assertEqual(line["steps"], alfworld.MAX_STEPS)  # "look" wins nothing
                self.assertEqual(line["reward"], 0.0)
                self.assertEqual(len(line["actions"]), len(line["observations"]))
                self.assertTrue(line["prompt"].endswith("\n>"))
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)


class SmokeProfileTest(unittest.TestCase):
    """The smoke profile's games are what its README section says a tiny model learns: one goal per type, nothing in
    the rooms but the goal's object and the lamp, the expert done within 9 steps, a game lost ended at its step limit."""

    def test_one_goal_per_type_only_its_object_short_expert_episodes(self):
        import random

        world = fixture_smoke_alfworld.micro_world()
        goals = fixture_smoke_alfworld.triples(world, fixed=True)
        self.assertEqual(sorted(t for t, _, _ in goals), sorted(fixture_smoke_alfworld.SMOKE_GOALS))
        for task_type, obj, dest in goals:
            for seed in range(20):
                game = fixture_smoke_alfworld.make_game(world, random.Random(seed), task_type, obj, dest, fixed=True)
                things = sorted(o for items in game["contents"].values() for o in items)
                copies = 2 if task_type == "pick_two_obj_and_place" else 1
                self.assertEqual(things, sorted(["desklamp 1"] + [f"{obj} {n}" for n in range(1, copies + 1)]))
                _, steps = fixture_smoke_alfworld.expert_episode(game)
                if task_type in fixture_smoke_alfworld.SMOKE_GAME_TYPES:
                    self.assertLessEqual(len(steps), 9, (task_type, seed))

    def test_a_smoke_game_not_won_ends_at_its_step_limit(self):
        import random

        from alfworld.agents.environment.alfred_tw_env import BatchEnv

        game = fixture_smoke_alfworld.make_game(fixture_smoke_alfworld.micro_world(), random.Random(0), "pick_and_place",
                                                "book", "desk", fixed=True)
        with tempfile.NamedTemporaryFile("w", suffix=".tw-pddl", delete=False) as f:
            json.dump({"solvable": True, "standin": game}, f)
        self.addCleanup(os.unlink, f.name)
        env = BatchEnv([f.name], 1, alfworld.MAX_STEPS, expert_plan=False)
        env.reset()
        dones = [env.step(["look"])[2][0] for _ in range(fixture_smoke_alfworld.SMOKE_STEP_LIMIT)]
        self.assertEqual(dones, [False] * (fixture_smoke_alfworld.SMOKE_STEP_LIMIT - 1) + [True])


if __name__ == "__main__":
    unittest.main()
