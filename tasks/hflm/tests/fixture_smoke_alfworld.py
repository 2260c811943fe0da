"""alfworld's fixture snapshot: stand-in household games in ALFWorld's data layout, ReAct-style prompts, a tiny model.

    from fixture_smoke_alfworld import write, SMOKE_MODEL
    write(hub_dir, profile)   # "default": a few games for tests of form; "smoke": the CPU smoke profile's games + model

What `hflm.assets prepare alfworld --from DIR` reads (the layout of a copied alfworld-download and ReAct repo):

    DIR/alfworld/json_2.1.1/{train,valid_unseen}/<task type>-<Object>-None-<Dest>-<n>/trial_T<seed>/
        traj_data.json    {"task_type", "pddl_params": {"object_target", "parent_target"}, "standin": true}
        game.tw-pddl      {"solvable": true, "standin": <the game alfworld.household plays>}
    DIR/github/ysymyth/ReAct/prompts/alfworld_3prompts.json   react_<put|clean|heat|cool|examine|puttwo>_<0|1|2>

The games are built from micro-alfworld's vocabulary (tasks/micro-alfworld/env: its six task types, the objects
each takes, its searchable receptacles and appliances, the desk's lamp), in ALFWorld's names ("cabinet 1",
"desklamp 1"). valid_unseen's (task type, object, destination) triples are never train's, as ALFWorld's unseen
split is out of distribution. The prompt file's examples are the stand-in expert's episodes on games of neither
split, written as ReAct's are ("> action" then the feedback, one line each); not ReAct's own text.

The smoke profile: every layout has the same five receptacles (cabinet, countertop, desk, drawer, shelf) and the
three appliances, listed in that order, so that the search order is one fixed sequence and an episode is short
(at most about 10 steps); a tiny model can then learn the rest (copy the object and destination from the task,
treat at the right appliance) from a few hundred expert episodes in about a minute on 2 CPUs. Its base model
(SMOKE_MODEL) is a tiny Qwen2 trained for a few seconds to answer every step with "inventory", as a base that
answers and stops: it wins no game, and since it ends each action with a newline its 50-step games cost little.
"""

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, TASKS)  # for hflm
# The stand-in's game engine, by its own name: the games are the stand-in's even where the real alfworld is installed.
sys.path.append(os.path.join(TASKS, "hflm", "standins", "alfworld"))

SMOKE_MODEL = "a2rl-fixture/smoke-alfworld"
DATA = "alfworld"  # the snapshot's copy of $ALFWORLD_DATA
PROMPTS = "github/ysymyth/ReAct/prompts/alfworld_3prompts.json"
COUNTS = {"default": {"train": 8, "valid_unseen": 4}, "smoke": {"train": 300, "valid_unseen": 24}}
SMOKE_RECEPTACLES = ["cabinet", "countertop", "desk", "drawer", "shelf"]
TYPE_NAMES = {  # micro-alfworld's task type -> ALFWorld's
    "pick_and_place": "pick_and_place_simple", "look_at_obj_in_light": "look_at_obj_in_light",
    "pick_clean_then_place": "pick_clean_then_place_in_recep", "pick_heat_then_place": "pick_heat_then_place_in_recep",
    "pick_cool_then_place": "pick_cool_then_place_in_recep", "pick_two_obj_and_place": "pick_two_obj_and_place",
}
WRONG_ACTION = "inventory"
# The smoke model: 2 layers of width 96, each attending to its last 128 tokens (hflm.tiny): without a window a
# 2-layer model learnt the actions' form in 120 steps but not which receptacle or object to name (0 games won).
SMOKE_HIDDEN, SMOKE_WINDOW = 96, 128


def micro_world():
    """micro-alfworld's world module (tasks/micro-alfworld/env/world.py), loaded by path: its folder is not a package name."""
    import importlib.util

    path = os.path.join(TASKS, "micro-alfworld", "env", "world.py")
    spec = importlib.util.spec_from_file_location("micro_alfworld_world", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_game(world, rng, task_type, obj, dest, fixed):
    """One stand-in game: receptacles (the room's listing), contents, the goal."""
    if fixed:
        searchable = list(SMOKE_RECEPTACLES)
    else:
        others = [r for r in world.SEARCHABLE if r not in (dest, world.LAMP_AT)]
        searchable = sorted({world.LAMP_AT, *([dest] if dest else []), *rng.sample(others, world.N_SEARCHABLE - 2)})
        searchable = searchable[: world.N_SEARCHABLE]
    appliances = [world.APPLIANCES[k] for k in ("heat", "cool", "clean")]
    receptacles = [f"{r} 1" for r in searchable + appliances]
    contents = {r: [] for r in receptacles}
    contents[f"{world.LAMP_AT} 1"].append("desklamp 1")
    places = [f"{r} 1" for r in searchable if r != dest]  # never where it must go: the game would start won
    copies = 2 if task_type == "pick_two_obj_and_place" else 1
    for n, place in enumerate(rng.sample(places, copies), start=1):
        contents[place].append(f"{obj} {n}")
    for other in rng.sample([o for o in world.ALL_OBJECTS if o != obj], rng.randint(1, 3)):
        contents[rng.choice([f"{r} 1" for r in searchable])].append(f"{other} 1")
    return {"task_type": TYPE_NAMES[task_type], "object": obj, "destination": f"{dest} 1" if dest else None,
            "receptacles": receptacles, "contents": contents}


def triples(world, fixed):
    """Every (task type, object, destination) of micro-alfworld's vocabulary (look tasks: no destination)."""
    dests = SMOKE_RECEPTACLES if fixed else world.DESTINATIONS
    out = []
    for task_type in world.TASK_TYPES:
        for obj in world.OBJECTS[task_type]:
            if task_type == "look_at_obj_in_light":
                out.append((task_type, obj, None))
            else:
                out += [(task_type, obj, d) for d in dests if d != world.LAMP_AT or fixed]
    return out


def expert_episode(game):
    """The stand-in expert's episode on a game: (opening text, [(action, feedback)])."""
    from household import Household

    house = Household(game)
    opening = house.reset()
    steps = []
    while not house.won and len(steps) < 50:
        action = house.expert()[0]
        steps.append((action, house.step(action)))
    return opening, steps


def example_text(game):
    """A ReAct-style worked example: the opening without its banner, then "> action" and the feedback per line."""
    opening, steps = expert_episode(game)
    return "\n".join(opening.split("\n\n")[1:]) + "\n" + "".join(f"> {a}\n{o}\n" for a, o in steps)


def write_game(root, split, index, seed, game):
    obj_name = game["object"].capitalize()
    dest_name = (game["destination"] or "None").split(" ")[0].capitalize()
    folder = os.path.join(root, "json_2.1.1", split, f"{game['task_type']}-{obj_name}-None-{dest_name}-{index}", f"trial_T{seed:08d}")
    os.makedirs(folder, exist_ok=True)
    traj = {"task_type": game["task_type"], "standin": True,
            "pddl_params": {"object_target": obj_name, "parent_target": dest_name if game["destination"] else ""}}
    with open(os.path.join(folder, "traj_data.json"), "w") as f:
        json.dump(traj, f, indent=1)
    with open(os.path.join(folder, "game.tw-pddl"), "w") as f:
        json.dump({"solvable": True, "standin": game}, f, indent=1)


def write(hub_dir, profile="default"):
    """Writes the alfworld snapshot folders (and, for "smoke", SMOKE_MODEL) into hub_dir; returns hub_dir."""
    world = micro_world()
    fixed = profile == "smoke"
    counts = COUNTS[profile]
    rng = random.Random(f"alfworld-fixture-{profile}")
    combos = triples(world, fixed)
    rng.shuffle(combos)
    held_out, seen = combos[: len(combos) // 4], combos[len(combos) // 4:]
    root = os.path.join(hub_dir, DATA)
    games = {"train": [], "valid_unseen": []}
    for split, pool in (("train", seen), ("valid_unseen", held_out)):
        for i in range(counts[split]):
            seed = 1_000_000 * (split != "train") + i
            task_type, obj, dest = pool[i % len(pool)] if split == "valid_unseen" else rng.choice(pool)
            game = make_game(world, random.Random(f"{profile}-{split}-{seed}"), task_type, obj, dest, fixed)
            write_game(root, split, i, seed, game)
            games[split].append(game)
    # The prompt file: three examples per task type, on games of seen triples that neither split holds.
    prompts = {}
    keys = {"pick_and_place": "put", "pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
            "pick_cool_then_place": "cool", "look_at_obj_in_light": "examine", "pick_two_obj_and_place": "puttwo"}
    for task_type, key in keys.items():
        of_type = [c for c in seen if c[0] == task_type]
        # The shortest of a few candidates: the examples are in every prompt, and a grading reads them at every step.
        candidates = [make_game(world, random.Random(f"{profile}-prompt-{key}-{n}"), *of_type[n % len(of_type)], fixed)
                      for n in range(12)]
        for n, game in enumerate(sorted(candidates, key=lambda g: len(example_text(g)))[:3]):
            prompts[f"react_{key}_{n}"] = example_text(game)
    path = os.path.join(hub_dir, PROMPTS)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(prompts, f, indent=1)
    if profile == "smoke":
        write_model(os.path.join(hub_dir, "models", SMOKE_MODEL), games["train"], prompts)
    return hub_dir


TINY_MODEL = "a2rl-fixture/tiny-alfworld"


def write_tiny_model(hub_dir):
    """TINY_MODEL into a hub folder holding the default profile's games: a 1-layer Qwen2 of width 32 whose tokenizer
    knows the games' words (a prompt is a few hundred tokens, not thousands), trained for a few steps to answer every
    step with "look" and a newline. It wins nothing and stops at once, so tests of the grader's and the rollouts' form
    play 50 cheap steps a game. Returns the model id."""
    from hflm import alfworld, tiny

    with open(os.path.join(hub_dir, PROMPTS)) as f:
        prompts = json.load(f)
    model_dir = os.path.join(hub_dir, "models", TINY_MODEL)
    tiny.build(model_dir, list(prompts.values()), seed=0, vocab_size=512, hidden_size=32, layers=1)
    contexts = [alfworld.react_prompt(prompts, key) + prompts[f"react_{key}_2"].split("\n")[0] + "\n>"
                for key in alfworld.TASK_PREFIXES.values()]
    answer_every_step(model_dir, contexts, " look\n", steps=40)
    return TINY_MODEL


def write_model(model_dir, train_games, prompts):
    """SMOKE_MODEL: a tiny Qwen2 whose tokenizer knows the games' words, trained to answer every step with WRONG_ACTION."""
    from hflm import alfworld, tiny

    transcripts = [example_text(g) for g in train_games[:200]]
    texts = list(prompts.values()) + transcripts + [alfworld.react_prompt(prompts, "put")]
    tiny.build(model_dir, texts, seed=0, vocab_size=768, hidden_size=SMOKE_HIDDEN, layers=2, sliding_window=SMOKE_WINDOW)
    # Prompts as the grader builds them at every step of the expert's episodes, each answered " inventory\n".
    contexts = []
    for game in train_games[:24]:
        opening, steps = expert_episode(game)
        key = alfworld.prompt_key(game["task_type"])
        prompt = alfworld.react_prompt(prompts, key) + alfworld.initial_observation(opening) + "\n>"
        for t in range(len(steps) + 1):
            contexts.append(alfworld.step_prompt(prompt, [a for a, _ in steps[:t]], [o for _, o in steps[:t]]))
    answer_every_step(model_dir, contexts, f" {WRONG_ACTION}\n")


def answer_every_step(model_dir, contexts, answer, steps=30, seed=0):
    """Trains the model in model_dir, in place, to complete each text context with `answer` (loss on it only)."""
    from transformers import AutoTokenizer

    from hflm import tiny

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    target = tokenizer(answer, add_special_tokens=False)["input_ids"]
    rows = []
    for context in contexts:
        ids = tokenizer(context, add_special_tokens=False)["input_ids"]
        rows.append((ids + target, [-100] * len(ids) + target))
    tiny.fit(model_dir, rows, steps, batch_size=8, seed=seed)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--profile", choices=sorted(COUNTS), default="default")
    args = parser.parse_args()
    write(args.dir, args.profile)
