"""The stand-in's game engine: one household game, played in ALFWorld's command language.

Not part of upstream's API (upstream plays PDDL games with TextWorld); `alfred_tw_env` loads a game file's
`standin` section and plays it here. A game is

    {"task_type": one of TASK_TYPES' names, "object": "mug", "destination": "cabinet 1" (None for a look task),
     "receptacles": ["cabinet 1", "desk 1", ...] (as the room lists them, the order the expert searches),
     "contents": {"cabinet 1": ["mug 1", "pen 1"], ...}}

and the commands and feedback are ALFWorld's: "go to desk 1" -> "You arrive at desk 1. On the desk 1, you see a
mug 1, and a desklamp 1."; "take mug 1 from desk 1"; "put mug 1 in/on cabinet 1"; "heat mug 1 with microwave 1"
(cool with a fridge, clean with a sinkbasin); "use desklamp 1"; "look"; "inventory"; "examine <receptacle>";
anything else "Nothing happens.". Differences from ALFRED's games: nothing is closed (no open/close), only the
goal's object type can be heated, cooled or cleaned, and a game ends only when won (or at the env's step limit).
"""

# Upstream's task type names (alfworld.agents.environment.alfred_tw_env.TASK_TYPES), and the goal each states.
GOALS = {
    "pick_and_place_simple": "put some {obj} in {dest}.",
    "look_at_obj_in_light": "look at {obj} under the desklamp.",
    "pick_clean_then_place_in_recep": "clean some {obj} and put it in {dest}.",
    "pick_heat_then_place_in_recep": "heat some {obj} and put it in {dest}.",
    "pick_cool_then_place_in_recep": "cool some {obj} and put it in {dest}.",
    "pick_two_obj_and_place": "find two {obj} and put them in {dest}.",
}
TREATMENT = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
             "pick_cool_then_place_in_recep": "cool"}
APPLIANCE = {"heat": "microwave", "cool": "fridge", "clean": "sinkbasin"}
LAMP = "desklamp 1"
NOTHING = "Nothing happens."
BANNER = "-= Welcome to TextWorld, ALFRED! =-"


def listing(items):
    """ALFWorld's enumeration: "a mug 1", "a mug 1, and a pen 2", "nothing"."""
    items = [f"a {i}" for i in items]
    if not items:
        return "nothing"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", and " + items[-1]


def kind(thing):
    """"mug 1" -> "mug"."""
    return thing.rsplit(" ", 1)[0]


def goal_text(game):
    dest = game.get("destination")
    return GOALS[game["task_type"]].format(obj=game["object"], dest=kind(dest) if dest else "")


class Household:
    """One game's state. reset() -> the opening text; step(command) -> feedback; won, admissible(), expert()."""

    def __init__(self, game):
        missing = [k for k in ("task_type", "object", "receptacles", "contents") if k not in game]
        if missing or game["task_type"] not in GOALS:
            raise ValueError(f"not a stand-in game (lacks {missing or 'a known task_type'}): regenerate the game files")
        self.game = game

    def reset(self):
        self.at = None  # the middle of the room
        self.contents = {r: list(self.game["contents"].get(r, [])) for r in self.game["receptacles"]}
        self.holding = None
        self.states = {}  # object -> set of "heat", "cool", "clean"
        self.lamp_on = False
        self.visited = set()
        self.won = False
        return (f"{BANNER}\n\nYou are in the middle of a room. Looking quickly around you, you see "
                f"{listing(self.game['receptacles'])}.\n\nYour task is to: {goal_text(self.game)}")

    # --- commands --------------------------------------------------------------------------------------------
    def admissible(self):
        commands = [f"go to {r}" for r in self.game["receptacles"] if r != self.at] + ["inventory", "look"]
        if self.at is not None:
            commands.append(f"examine {self.at}")
            if self.holding is None:
                commands += [f"take {o} from {self.at}" for o in self.contents[self.at] if o != LAMP]
            else:
                commands.append(f"put {self.holding} in/on {self.at}")
                for verb, appliance in APPLIANCE.items():
                    if kind(self.at) == appliance:
                        commands.append(f"{verb} {self.holding} with {self.at}")
            if LAMP in self.contents[self.at]:
                commands.append(f"use {LAMP}")
        return sorted(commands)

    def step(self, command):
        command = " ".join(str(command).strip().split())
        feedback = self._apply(command) if command in self.admissible() else NOTHING
        self.won = self.won or self._goal_met()
        return feedback

    def _apply(self, command):
        here = self.contents.get(self.at)
        if command.startswith("go to "):
            self.at = command[len("go to "):]
            self.visited.add(self.at)
            return f"You arrive at {self.at}. On the {self.at}, you see {listing(self.contents[self.at])}."
        if command == "inventory":
            return f"You are carrying: a {self.holding}." if self.holding else "You are not carrying anything."
        if command == "look":
            if self.at is None:
                return f"You are in the middle of a room. Looking quickly around you, you see {listing(self.game['receptacles'])}."
            return f"You are facing the {self.at}. Next to it, you see nothing."
        if command.startswith("examine "):
            return f"On the {self.at}, you see {listing(here)}."
        if command.startswith("take "):
            obj = command[len("take "):].split(" from ")[0]
            here.remove(obj)
            self.holding = obj
            return f"You pick up the {obj} from the {self.at}."
        if command.startswith("put "):
            obj, self.holding = self.holding, None
            here.append(obj)
            return f"You put the {obj} in/on the {self.at}."
        if command == f"use {LAMP}":
            self.lamp_on = True
            return f"You turn on the {LAMP}."
        verb = command.split(" ", 1)[0]  # heat, cool, clean
        self.states.setdefault(self.holding, set()).add(verb)
        return f"You {verb} the {self.holding} using the {self.at}."

    def _goal_met(self):
        game, obj = self.game, self.game["object"]
        if game["task_type"] == "look_at_obj_in_light":
            return self.lamp_on and self.holding is not None and kind(self.holding) == obj and LAMP in self.contents.get(self.at, [])
        placed = [o for o in self.contents[game["destination"]] if kind(o) == obj]
        need = TREATMENT.get(game["task_type"])
        if need:
            placed = [o for o in placed if need in self.states.get(o, ())]
        return len(placed) >= (2 if game["task_type"] == "pick_two_obj_and_place" else 1)

    # --- the expert (upstream's handcoded expert plays the train split's `extra.expert_plan`) -------------------
    def expert(self):
        """The next command of a scripted expert that searches the receptacles in the room's order; [] once won."""
        if self.won:
            return []
        game, obj = self.game, self.game["object"]
        look = game["task_type"] == "look_at_obj_in_light"
        dest = game.get("destination")
        need = TREATMENT.get(game["task_type"])
        if self.holding is None:
            here = self._to_move(self.at)
            if self.at is not None and here:
                return [f"take {here[0]} from {self.at}"]
            unvisited = [r for r in game["receptacles"] if r not in self.visited and r != dest]
            if not unvisited:  # a second object, or one put at the destination untreated, where the search passed
                unvisited = [r for r in game["receptacles"] if r != self.at and self._to_move(r)]
            return [f"go to {unvisited[0]}"]
        if kind(self.holding) != obj:  # something else in hand (the agent took it): put it down here
            return [f"put {self.holding} in/on {self.at}"]
        if need and need not in self.states.get(self.holding, ()):
            appliance = next(r for r in game["receptacles"] if kind(r) == APPLIANCE[need])
            return [f"go to {appliance}" if self.at != appliance else f"{need} {self.holding} with {appliance}"]
        if look:
            desk = next(r for r, items in self.contents.items() if LAMP in items)
            return [f"go to {desk}" if self.at != desk else f"use {LAMP}"]
        return [f"go to {dest}" if self.at != dest else f"put {self.holding} in/on {dest}"]

    def _to_move(self, place):
        """The goal's objects at `place` the goal still needs moved: any not at the destination, or there untreated."""
        need = TREATMENT.get(self.game["task_type"])
        return [o for o in self.contents.get(place) or [] if kind(o) == self.game["object"]
                and (place != self.game.get("destination") or (need and need not in self.states.get(o, ())))]
