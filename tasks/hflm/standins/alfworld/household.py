"""The stand-in's game engine: one household game, played in ALFWorld 0.4+'s command language.

Not part of upstream's API (upstream plays PDDL games with TextWorld); `alfred_tw_env` loads a game file's
`standin` section and plays it here. A game is

    {"task_type": one of GOALS' names, "object": "mug", "destination": "cabinet 1" (None for a look task),
     "receptacles": ["fridge 1", "cabinet 1", ...] (as the room lists them),
     "contents": {"cabinet 1": ["mug 1", "pen 1"], ...},
     "step_limit": 20 (optional: the episode ends after so many steps if not won, before the env's own limit)}

Its semantics are upstream's (alfworld/data/alfred.pddl for what a command needs and does, alfred.twl2 for the
command templates and feedback texts): "go to cabinet 1" -> "You arrive at cabinet 1. The cabinet 1 is closed.";
"open cabinet 1" -> "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1."; "close X";
"take mug 1 from cabinet 1"; "move mug 1 to desk 1"; "heat mug 1 with microwave 1" (cool with a fridge, clean with
a sinkbasin); "use desklamp 1"; "look"; "inventory"; "examine <receptacle or held object>"; a command that is not
admissible: "Nothing happens.". Receptacles of OPENABLE's types start closed, and their contents can be neither
seen, taken nor added to until opened. A game is won when its task type's goal holds (any receptacle of the
destination's type counts, as upstream's goals name a type); it ends only when won (or at the env's step limit).
What differs from upstream: every object can be picked up, heated, cooled, cleaned and put anywhere (upstream's
domain restricts these by object and receptacle type), nothing lies on the floor, and nothing can be sliced.
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
# alfworld.gen.constants.OPENABLE_CLASS_LIST, lower-cased: receptacles that start closed.
OPENABLE = ("fridge", "cabinet", "microwave", "drawer", "safe", "box")
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


def object_text(obj, states):
    """alfred.twl2's examineObject feedback for a held object in states (a set of "heat", "cool", "clean")."""
    if "clean" in states and states & {"heat", "cool"}:
        return f"This is a {'hot' if 'heat' in states else 'cool'} and clean {obj}."
    for state, word in (("heat", "hot"), ("clean", "clean"), ("cool", "cold")):
        if state in states:
            return f"This is a {word} {obj}."
    return f"There's nothing special about {obj}."


class Household:
    """One game's state. reset() -> the opening text; step(command) -> feedback; won, admissible(), expert()."""

    def __init__(self, game):
        missing = [k for k in ("task_type", "object", "receptacles", "contents") if k not in game]
        if missing or game["task_type"] not in GOALS:
            raise ValueError(f"not a stand-in game (lacks {missing or 'a known task_type'}): regenerate the game files")
        self.game = game

    def reset(self):
        self.lamp = self.game.get("lamp", LAMP)
        self.fixed = set(self.game.get("fixed", [self.lamp]))  # what cannot be picked up
        self.at = None  # the middle of the room
        self.contents = {r: list(self.game["contents"].get(r, [])) for r in self.game["receptacles"]}
        self.opened = set()
        self.holding = None
        self.states = {}  # object -> set of "heat", "cool", "clean"
        self.lamp_on = False
        self.won = False
        self.plan = Expert(self)
        return f"{BANNER}\n\n{self._room()}\n\nYour task is to: {self.game.get('task') or goal_text(self.game)}"

    def _room(self):
        return f"You are in the middle of a room. Looking quickly around you, you see {listing(self.game['receptacles'])}."

    def openable(self, receptacle):
        if "openable" in self.game:  # a real game's own (openable r) facts
            return receptacle in self.game["openable"]
        return kind(receptacle) in OPENABLE

    def reachable(self, receptacle):
        """Whether the receptacle's contents can be seen, taken and added to: open, or never closed."""
        return not self.openable(receptacle) or receptacle in self.opened

    def examine_text(self, r):
        if not self.reachable(r):
            return f"The {r} is closed."
        if self.openable(r):
            return f"The {r} is open. In it, you see {listing(self.contents[r])}."
        return f"On the {r}, you see {listing(self.contents[r])}."

    # --- commands --------------------------------------------------------------------------------------------
    def admissible(self):
        """The commands whose PDDL preconditions hold now, sorted as TextWorld lists them."""
        commands = [f"go to {r}" for r in self.game["receptacles"] if r != self.at] + ["inventory", "look"]
        if self.at is not None:
            r = self.at
            commands.append(f"examine {r}")
            if self.openable(r):
                commands.append(f"close {r}" if r in self.opened else f"open {r}")
            if self.holding is None and self.reachable(r):
                commands += [f"take {o} from {r}" for o in self.contents[r] if o not in self.fixed]
            if self.holding is not None:
                if self.reachable(r):
                    commands.append(f"move {self.holding} to {r}")
                for verb, appliance in APPLIANCE.items():
                    if kind(r) == appliance:
                        commands.append(f"{verb} {self.holding} with {r}")
            if self.lamp in self.contents[r]:
                commands.append(f"use {self.lamp}")
        if self.holding is not None:
            commands.append(f"examine {self.holding}")
        return sorted(commands)

    def step(self, command):
        command = " ".join(str(command).strip().split())
        feedback = self._apply(command) if command in self.admissible() else NOTHING
        self.won = self.won or self._goal_met()
        self.plan.observe(command, feedback)
        return feedback

    def _apply(self, command):
        r, here = self.at, self.contents.get(self.at)
        if command.startswith("go to "):
            self.at = command[len("go to "):]
            return f"You arrive at {self.at}. {self.examine_text(self.at)}"
        if command == "inventory":
            return f"You are carrying: a {self.holding}." if self.holding else "You are not carrying anything."
        if command == "look":
            return self._room() if r is None else f"You are facing the {r}. Next to it, you see nothing."
        if command == f"examine {self.holding}":
            return object_text(self.holding, self.states.get(self.holding, set()))
        if command.startswith("examine "):
            return self.examine_text(r)
        if command.startswith("open "):
            self.opened.add(r)
            return f"You open the {r}. {self.examine_text(r)}"
        if command.startswith("close "):
            self.opened.discard(r)
            return f"You close the {r}."
        if command.startswith("take "):
            obj = command[len("take "):].split(" from ")[0]
            here.remove(obj)
            self.holding = obj
            return f"You pick up the {obj} from the {r}."
        if command.startswith("move "):
            obj, self.holding = self.holding, None
            here.append(obj)
            return f"You move the {obj} to the {r}."
        if command == f"use {self.lamp}":
            self.lamp_on = True
            return f"You turn on the {self.lamp}."
        verb = command.split(" ", 1)[0]  # heat, cool, clean: heating undoes cooling and the reverse (alfred.pddl)
        states = self.states.setdefault(self.holding, set())
        states -= {"heat": {"cool"}, "cool": {"heat"}}.get(verb, set())
        states.add(verb)
        return f"You {verb} the {self.holding} using the {r}."

    def placed(self):
        """The goal's objects lying in a receptacle of the destination's type, treated as the task type needs."""
        game, need = self.game, TREATMENT.get(self.game["task_type"])
        return [o for r, items in self.contents.items() if kind(r) == kind(game["destination"]) for o in items
                if kind(o) == game["object"] and (not need or need in self.states.get(o, ()))]

    def _goal_met(self):
        game = self.game
        if game["task_type"] == "look_at_obj_in_light":
            return (self.lamp_on and self.holding is not None and kind(self.holding) == game["object"]
                    and self.lamp in self.contents.get(self.at, []))
        return len(self.placed()) >= (2 if game["task_type"] == "pick_two_obj_and_place" else 1)

    def expert(self):
        """extra.expert_plan: upstream's handcoded expert's next command; [] once won."""
        return [] if self.won else [self.plan.next()]


class Expert:
    """The behaviour of upstream's handcoded TextWorld expert (alfworld/agents/expert/handcoded_expert*.py), on the
    game's state and what it has seen: it opens with "look"; it searches for the goal's object receptacle by
    receptacle from the end of the room's listing (upstream's order where its object priors do not apply), opening a
    closed one and, if the object is not inside, closing it again before it moves on; it takes the object, goes to the
    type's first appliance and treats it there (without opening it), then goes to the last receptacle of the
    destination's type, opens it if closed and moves the object in (a pick-two task: twice, never retaking an object
    it placed). Something else in hand goes back where it was taken from. It follows the agent: each step it
    observes the command actually played."""

    def __init__(self, house):
        self.house = house
        self.started = False
        self.searched = set()  # receptacles whose inside it has seen: not searched again
        self.seen = {}  # object -> the receptacle it was last seen in
        self.close_next = None  # the receptacle it stands at and just opened: closed again if what it seeks is not in
        self.taken_from = None
        self.placed = set()  # goal objects already counted at the destination: never taken again

    def observe(self, command, feedback):
        house, at = self.house, self.house.at
        self.started = True
        if feedback == NOTHING:
            return
        if command.startswith(("go to ", "close ", "take ")):
            self.close_next = None
        if command.startswith("open "):
            self.close_next = at
        if command.startswith(("go to ", "open ", "examine ")) and at is not None and house.reachable(at):
            self.searched.add(at)
            for o in house.contents[at]:
                self.seen[o] = at
        if command.startswith("take "):
            self.taken_from = at
            self.seen.pop(house.holding, None)
        if command.startswith("move "):
            obj = command[len("move "):].split(" to ")[0]
            self.seen[obj] = at
            if house.game.get("destination") and obj in house.placed():
                self.placed.add(obj)

    def next(self):
        house, game = self.house, self.house.game
        if not self.started:
            return "look"
        obj, held, at = game["object"], house.holding, house.at
        need = TREATMENT.get(game["task_type"])
        if held is not None and kind(held) != obj:  # not what the task needs: back where it came from
            return f"move {held} to {at}" if at == self.taken_from else f"go to {self.taken_from}"
        if held is not None:
            if need and need not in house.states.get(held, ()):
                appliance = next(r for r in game["receptacles"] if kind(r) == APPLIANCE[need])
                return f"{need} {held} with {at}" if at == appliance else f"go to {appliance}"
            if game["task_type"] == "look_at_obj_in_light":
                return self._search(house.lamp)
            dest = [r for r in game["receptacles"] if kind(r) == kind(game["destination"])][-1]
            if at != dest:
                return f"go to {dest}"
            return f"move {held} to {at}" if house.reachable(at) else f"open {at}"
        return self._search(obj)

    def _search(self, wanted):
        """The next command of a search for `wanted` (an object's type, or the lamp's name)."""
        house, at = self.house, self.house.at

        def fits(o):
            return (o == wanted or kind(o) == wanted) and o not in self.placed

        if at is not None and (house.reachable(at) or wanted == house.lamp):
            found = [o for o in house.contents[at] if fits(o)]
            if found:
                return f"use {house.lamp}" if wanted == house.lamp else f"take {found[0]} from {at}"
        # Upstream's expert opens a closed receptacle at every visit: one it saw the object in (closed since, by the
        # agent) is opened again rather than passed by.
        seen_here = any(r == at and fits(o) for o, r in self.seen.items())
        if at is not None and not house.reachable(at) and (at not in self.searched or seen_here):
            return f"open {at}"
        if self.close_next == at and at in house.opened:
            return f"close {at}"
        known = [r for o, r in self.seen.items() if fits(o) and r != at and o in house.contents[r]]
        if known:
            return f"go to {known[0]}"
        unsearched = [r for r in house.game["receptacles"] if r != at and r not in self.searched]
        if not unsearched:  # moved where it looked already (by the agent): search the room again
            self.searched.clear()
            unsearched = [r for r in house.game["receptacles"] if r != at]
        return f"go to {unsearched[-1]}"
