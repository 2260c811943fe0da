"""AlfredTWEnv with upstream's constructor, game collection and init_env, on the stand-in's games.

Upstream (alfworld 0.4/0.5, alfworld/agents/environment/alfred_tw_env.py) walks the split's folder for
traj_data.json + game.tw-pddl pairs, keeps the solvable games of the configured task types (not "movable" or
"Sliced" ones), cuts them to num_train_games / num_eval_games, and init_env(batch_size) registers them with
textworld.gym: a batch env whose reset() loads the next batch_size games of a cycle shuffled with seed 1234
(textworld's TextworldBatchGymEnv), and whose step() takes a list of commands and returns tuples of observations,
scores and dones and a dict of lists of infos, a finished game repeating its last state. The step limit is
dagger.training.max_nb_steps_per_episode (rl.training.… under DQN). Here the same, without TextWorld and in one
process (upstream's textworld.gym forks one per game, asynchronous=True): each game file's "standin" section, or a
real game's PDDL problem (pddl_game), is played by alfworld.household.
"""

import json
import os
import re

import numpy as np

from alfworld.household import Household

TASK_TYPES = {1: "pick_and_place_simple",
              2: "look_at_obj_in_light",
              3: "pick_clean_then_place_in_recep",
              4: "pick_heat_then_place_in_recep",
              5: "pick_cool_then_place_in_recep",
              6: "pick_two_obj_and_place"}
GAME_SEED = 1234  # textworld.gym's TextworldBatchGymEnv seeds its game order with it


class AlfredTWEnv(object):
    """Interface for the text env, as upstream's: AlfredTWEnv(config, train_eval).init_env(batch_size)."""

    def __init__(self, config, train_eval="train"):
        self.config = config
        self.train_eval = train_eval
        self.collect_game_files()

    def collect_game_files(self):
        splits = {"train": "data_path", "eval_in_distribution": "eval_id_data_path",
                  "eval_out_of_distribution": "eval_ood_data_path"}
        if self.train_eval not in splits:
            raise ValueError(f"train_eval must be one of {', '.join(splits)}, not {self.train_eval!r}")
        data_path = os.path.expandvars(self.config["dataset"][splits[self.train_eval]])
        task_types = [TASK_TYPES[t] for t in self.config["env"]["task_types"] if t in TASK_TYPES]
        assert len(task_types) > 0
        self.game_files = []
        for root, _dirs, files in os.walk(data_path, topdown=False):  # upstream's walk, and so its order
            if "traj_data.json" not in files or "movable" in root or "Sliced" in root:
                continue
            game_file = os.path.join(root, "game.tw-pddl")
            with open(os.path.join(root, "traj_data.json")) as f:
                if json.load(f)["task_type"] not in task_types or not os.path.exists(game_file):
                    continue
            with open(game_file) as f:
                if json.load(f).get("solvable"):
                    self.game_files.append(game_file)
        limit = self.config["dataset"]["num_train_games" if self.train_eval == "train" else "num_eval_games"]
        if limit > 0:
            self.game_files = self.game_files[:limit]
        self.num_games = len(self.game_files)

    def init_env(self, batch_size):
        method = self.config["general"]["training_method"]
        if method == "dqn":
            max_steps = self.config["rl"]["training"]["max_nb_steps_per_episode"]
        elif method == "dagger":
            max_steps = self.config["dagger"]["training"]["max_nb_steps_per_episode"]
        else:
            raise NotImplementedError
        # Upstream adds the handcoded expert's plan to the infos on the train split under DAgger only.
        expert_plan = method == "dagger" and self.train_eval == "train"
        return BatchEnv(self.game_files, batch_size, max_steps, expert_plan)


def load_game(game_file):
    """The Household of a game file: the project's stand-in game, or a real one (alfworld-download's game.tw-pddl
    beside its traj_data.json) read from its PDDL problem by pddl_game."""
    with open(game_file) as f:
        data = json.load(f)
    if "standin" in data:
        return Household(data["standin"])
    traj_file = os.path.join(os.path.dirname(game_file), "traj_data.json")
    if "pddl_problem" not in data or not os.path.exists(traj_file):
        raise ValueError(f"{game_file} is neither a stand-in game nor an ALFWorld game.tw-pddl beside its "
                         "traj_data.json: download the games again (alfworld-download) or prepare from the fixture")
    with open(traj_file) as f:
        traj = json.load(f)
    return Household(pddl_game(data["pddl_problem"], traj, data.get("grammar", "")))


FACT = re.compile(r"\(\s*([A-Za-z]+)((?:\s+[^\s()]+)+)\s*\)")


def entity_names(ids):
    """{PDDL id: name} as upstream's Demangler names them (alfworld/agents/utils/misc.py): the id's type (before the
    first "_bar_", lower case, "basin" added for a basin), numbered from the end of the sorted ids ("cabinet 1" is
    the last cabinet in sorted order)."""
    def base(i):
        return i.split("_bar_", 1)[0] + ("basin" if "basin" in i else "")

    ordered = sorted(ids)
    counts = {}
    for i in ordered:
        counts[base(i)] = counts.get(base(i), 0) + 1
    names = {}
    for i in ordered:
        names[i] = f"{base(i)} {counts[base(i)]}"
        counts[base(i)] -= 1
    return names


def pddl_game(problem, traj, grammar=""):
    """A stand-in game from a real game's PDDL problem (its :init facts) and traj_data.json's task."""
    facts = [(m[1].lower(), m[2].lower().split()) for m in FACT.finditer(problem.split("(:goal", 1)[0])]
    of = {}
    for name, args in facts:
        of.setdefault(name, []).append(args)
    receptacles = [a[0] for a in of.get("receptacletype", [])]
    inside = of.get("inreceptacle", [])
    objects = [a[0] for a in of.get("objecttype", [])]
    if not receptacles or not inside:
        raise ValueError("the game's PDDL problem has no (receptacleType ...) or (inReceptacle ...) facts: "
                         "is it alfworld-download's game.tw-pddl?")
    names = entity_names(set(receptacles) | set(objects) | {i for pair in inside for i in pair})
    listed = sorted(receptacles)  # TextWorld lists entities in id order: "a cabinet 3, a cabinet 2, a cabinet 1, ..."
    contents = {names[r]: [] for r in listed}
    for obj, r in sorted(inside):
        contents[names[r]].append(names[obj])
    params = traj["pddl_params"]
    target, parent = params["object_target"].lower(), (params.get("parent_target") or "").lower()
    of_parent = [names[r] for r in listed if names[r].rsplit(" ", 1)[0] == parent]
    toggles = sorted(names[a[0]] for a in of.get("toggleable", []))
    task = re.search(r"Your task is to: ([^\"\n]*)", grammar)
    return {"task_type": traj["task_type"], "object": target, "destination": of_parent[-1] if of_parent else None,
            "receptacles": [names[r] for r in listed], "contents": contents,
            "openable": [names[a[0]] for a in of.get("openable", [])],
            "fixed": sorted(names[o] for o in objects if [o] not in of.get("pickupable", [])),
            "lamp": next((t for t in toggles if t.startswith((params.get("toggle_target") or "desklamp").lower())),
                         "desklamp 1"),
            "task": task[1] if task else None}


def shuffled_cycle(items, rng):
    """textworld.gym.envs.utils.shuffled_cycle: the items in order, then reshuffled for each further loop."""
    items = list(items)
    yield from items
    while True:
        rng.shuffle(items)
        yield from items


class BatchEnv:
    """textworld.gym's batch env over stand-in games: reset() -> (obs, infos); step(commands) -> (obs, scores, dones, infos)."""

    def __init__(self, game_files, batch_size, max_steps, expert_plan):
        self.batch_size = batch_size
        self.max_steps = max_steps
        self.expert_plan = expert_plan
        self.game_files = list(game_files)
        self.games = []
        self.seed(GAME_SEED)

    def seed(self, seed=None):
        rng = np.random.RandomState(seed)
        files = list(self.game_files)
        rng.shuffle(files)
        self._files = shuffled_cycle(files, rng)
        return [seed]

    def skip(self, nb_games=1):
        for _ in range(nb_games):
            next(self._files)

    def reset(self):
        self.files = [next(self._files) for _ in range(self.batch_size)]
        self.games = [load_game(f) for f in self.files]
        self.steps = [0] * self.batch_size
        self.last = [None] * self.batch_size
        obs = tuple(game.reset() for game in self.games)
        return obs, self._infos()

    def step(self, commands):
        assert isinstance(commands, (list, tuple)), "Expected a list of commands."
        assert len(commands) == self.batch_size, "Expected one command per game."
        results = []
        for i, (game, command) in enumerate(zip(self.games, commands)):
            if self.last[i] is not None and self.last[i][2]:  # ended before: its last state again
                results.append(self.last[i])
                continue
            feedback = game.step(command)
            self.steps[i] += 1
            # A stand-in game may end sooner ("step_limit", the project's smoke games): not upstream's, which has none.
            done = game.won or self.steps[i] >= min(self.max_steps, game.game.get("step_limit") or self.max_steps)
            results.append((feedback, float(game.won), done))
        self.last = results
        obs, scores, dones = (tuple(r[k] for r in results) for k in range(3))
        return obs, scores, dones, self._infos()

    def _infos(self):
        infos = {"won": [g.won for g in self.games], "admissible_commands": [g.admissible() for g in self.games],
                 "extra.gamefile": list(self.files)}
        if self.expert_plan:
            infos["extra.expert_plan"] = [g.expert() for g in self.games]
        return infos

    def close(self):
        self.games = []
