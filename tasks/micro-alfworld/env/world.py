"""The micro-alfworld household: layouts, goals and the text environment.

A game is {"seed": int, "task_type": str, "object": str, "destination": str}; the seed fixes the
layout (which receptacles, their search order, where the objects lie), the rest fixes the goal.
Everything is a pure function of the game, so the same game and actions give the same episode.
"""

import random

# Receptacles an object can lie on or in; `search` visits them. The lamp is always on the desk.
SEARCHABLE = ["countertop", "cabinet", "drawer", "shelf", "sidetable", "dresser", "diningtable", "coffeetable",
              "armchair", "sofa", "bed", "garbagecan", "safe", "toilet"]
LAMP_AT = "desk"
APPLIANCES = {"heat": "microwave", "cool": "fridge", "clean": "sinkbasin"}
DESTINATIONS = ["countertop", "cabinet", "drawer", "shelf", "sidetable", "dresser", "diningtable", "coffeetable"]
N_SEARCHABLE = 6  # per layout, the desk included

# ALFWorld's six task types: the goal text and which objects each takes.
TASK_TYPES = [
    "pick_and_place", "pick_clean_then_place", "pick_heat_then_place",
    "pick_cool_then_place", "look_at_obj_in_light", "pick_two_obj_and_place",
]
TREATMENT = {"pick_clean_then_place": "clean", "pick_heat_then_place": "heat", "pick_cool_then_place": "cool"}
STATE_WORD = {"clean": "clean", "heat": "hot", "cool": "cool"}
OBJECTS = {
    "pick_and_place": ["mug", "apple", "book", "pen", "vase", "plate", "bowl", "cellphone", "keychain", "candle"],
    "pick_clean_then_place": ["mug", "cup", "plate", "bowl", "apple", "tomato", "potato", "spoon", "knife", "pan"],
    "pick_heat_then_place": ["mug", "cup", "apple", "tomato", "potato", "egg", "bread", "plate", "bowl", "pan"],
    "pick_cool_then_place": ["mug", "cup", "apple", "tomato", "potato", "egg", "bread", "bottle", "lettuce", "pan"],
    "look_at_obj_in_light": ["book", "pen", "cellphone", "keychain", "vase", "mug", "cup", "plate", "candle", "bowl"],
    "pick_two_obj_and_place": ["mug", "apple", "book", "pen", "vase", "plate", "bowl", "cellphone", "keychain", "candle"],
}
ALL_OBJECTS = sorted({o for objs in OBJECTS.values() for o in objs})
MAX_STEPS = 50
MAX_INVALID = 5  # invalid actions in a row that end the episode
NOTHING = "Nothing happens."


def goal_text(task_type, obj, destination):
    if task_type == "look_at_obj_in_light":
        return f"look at {obj} under the lamp"
    if task_type == "pick_two_obj_and_place":
        return f"put two {obj}s in {destination}"
    if task_type in TREATMENT:
        return f"put a {STATE_WORD[TREATMENT[task_type]]} {obj} in {destination}"
    return f"put {'an' if obj[0] in 'aeiou' else 'a'} {obj} in {destination}"


def random_goal(rng):
    task_type = rng.choice(TASK_TYPES)
    obj = rng.choice(OBJECTS[task_type])
    destination = LAMP_AT if task_type == "look_at_obj_in_light" else rng.choice(DESTINATIONS)
    return task_type, obj, destination


class AlfworldEnv:
    """reset(seed, options) -> (obs, info); step(action) -> (obs, reward, done, info). See the package docstring."""

    def reset(self, seed, options=None):
        options = options or {}
        rng = random.Random(f"micro-alfworld-layout-{int(seed)}")
        if "task_type" in options:
            task_type, obj, dest = options["task_type"], options["object"], options["destination"]
        else:
            task_type, obj, dest = random_goal(random.Random(f"micro-alfworld-goal-{int(seed)}"))
        if task_type not in OBJECTS:
            raise ValueError(f"unknown task_type {task_type!r}")
        self.task_type, self.obj, self.dest = task_type, obj, dest
        others = [r for r in SEARCHABLE if r != dest]
        chosen = {LAMP_AT, dest} if dest != LAMP_AT else {LAMP_AT}
        chosen |= set(rng.sample(others, N_SEARCHABLE - len(chosen)))
        self.searchable = sorted(chosen)
        rng.shuffle(self.searchable)  # the search order
        self.receptacles = self.searchable + [APPLIANCES[k] for k in ("heat", "cool", "clean")]
        self.contents = {r: [] for r in self.receptacles}
        # The goal object(s): uniformly on a searchable receptacle; the two of pick_two apart, not at the destination.
        if task_type == "pick_two_obj_and_place":
            for r in rng.sample([r for r in self.searchable if r != dest], 2):
                self.contents[r].append(obj)
        else:
            self.contents[rng.choice(self.searchable)].append(obj)
        distractors = rng.sample([o for o in ALL_OBJECTS if o != obj], rng.randint(3, 6))
        for d in distractors:
            self.contents[rng.choice(self.searchable)].append(d)
        for r in self.searchable:
            rng.shuffle(self.contents[r])
        self.at = "room"
        self.checked = set()
        self.holding = None  # None or the treatment state ("" untreated, "hot", "cool", "clean")
        self.placed = 0
        self.steps = 0
        self.invalid_streak = 0
        self.done = False
        self.success = False
        self.goal = goal_text(task_type, obj, dest)
        return self._obs(), self._info()

    # --- observation -------------------------------------------------------------------------------------------
    def _obs(self, prefix=""):
        here = self.contents.get(self.at, [])
        others = sum(o != self.obj for o in here)
        see = [o for o in here if o == self.obj] + ([f"{others} other{'s' if others > 1 else ''}"] if others else [])
        at = f"{self.at} (goal)" if self.at == self.dest else self.at
        held = "nothing" if self.holding is None else (f"{self.holding} {self.obj}" if self.holding else self.obj)
        unchecked = sum(r not in self.checked for r in self.searchable)
        return f"{prefix}at: {at} | see: {', '.join(see) or 'nothing'} | holding: {held} | unchecked: {unchecked} | goal: {self.goal}"

    def admissible(self):
        if self.done:
            return []
        acts = []
        if any(r not in self.checked for r in self.searchable):
            acts.append("search")
        acts += [f"go {r}" for r in self.receptacles if r != self.at]
        if self.holding is None and self.obj in self.contents.get(self.at, []):
            acts.append("take")
        if self.holding is not None:
            acts.append("put")
            for verb, place in APPLIANCES.items():
                if self.at == place and self.holding != STATE_WORD[verb]:
                    acts.append(verb)
            if self.at == LAMP_AT:
                acts.append("use lamp")
        return acts

    def _info(self):
        info = {"task_type": self.task_type, "admissible": self.admissible()}
        if self.done:
            info["success"] = self.success
        return info

    # --- dynamics ----------------------------------------------------------------------------------------------
    def _go(self, place):
        self.at = place
        self.checked.add(place)

    def step(self, action):
        if self.done:
            return self._obs(), 0.0, True, self._info()
        self.steps += 1
        action = " ".join(str(action).strip().lower().split())
        outcome = self._apply(action)  # "ok", "invalid", "fail" or "success"
        reward = 0.0
        prefix = ""
        if outcome == "invalid":
            self.invalid_streak += 1
            prefix = NOTHING + " "
            if self.invalid_streak >= MAX_INVALID:
                self.done = True
        else:
            self.invalid_streak = 0
        if outcome == "fail":
            self.done = True
            prefix = "You failed. "
        elif outcome == "success":
            self.done, self.success, reward = True, True, 1.0
            prefix = "You won. "
        if self.steps >= MAX_STEPS:
            self.done = True
        return self._obs(prefix), reward, self.done, self._info()

    def _apply(self, action):
        if action == "search":
            for r in self.searchable:
                if r not in self.checked:
                    self._go(r)
                    return "ok"
            return "invalid"
        if action.startswith("go "):
            place = action[3:]
            if place not in self.receptacles or place == self.at:
                return "invalid"
            self._go(place)
            return "ok"
        if action == "take":
            here = self.contents.get(self.at, [])
            if self.holding is not None or self.obj not in here:
                return "invalid"
            here.remove(self.obj)
            self.holding = ""
            return "ok"
        if action == "put":
            if self.holding is None:
                return "invalid"
            needed = STATE_WORD[TREATMENT[self.task_type]] if self.task_type in TREATMENT else None
            if self.task_type == "look_at_obj_in_light" or self.at != self.dest:
                return "fail"
            if needed is not None and self.holding != needed:
                return "fail"
            self.holding = None
            self.placed += 1  # placed objects are out of play (not listed under see)
            if self.task_type == "pick_two_obj_and_place" and self.placed < 2:
                return "ok"
            return "success"
        if action in APPLIANCES:
            if self.holding is None or self.at != APPLIANCES[action] or self.holding == STATE_WORD[action]:
                return "invalid"
            self.holding = STATE_WORD[action]
            return "ok"
        if action == "use lamp":
            if self.holding is None or self.at != LAMP_AT:
                return "invalid"
            return "success" if self.task_type == "look_at_obj_in_light" else "invalid"
        return "invalid"


def parse(obs):
    """The fields of an observation: goal, at, see (list), holding, unchecked (int)."""
    fields = {}
    for part in obs.split(" | "):
        key, _, value = part.partition(": ")
        fields[key.split(". ")[-1]] = value
    fields["see"] = [] if fields.get("see") == "nothing" else fields.get("see", "").split(", ")
    fields["at"] = fields.get("at", "").replace(" (goal)", "")
    return fields
