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

The smoke profile (what the CPU smoke oracle learns from, within minutes on 2 CPUs): every room has the three
appliances, then the same four receptacles, none closed (countertop, desk, dresser, shelf; the goal's destination
first, so searched last), and holds only the goal's object (and the desk's lamp); each task type has one goal
(SMOKE_GOALS), so that a game asks what its type does and differs from the others by where the object lies. An
episode is short ("look", then at most 8 steps; a game not won ends after SMOKE_STEP_LIMIT steps) and the policy is
closed-loop but local: search from the end of the room's listing until the object is in view, take it from there,
treat it at the type's appliance, put it at the type's destination (or use the lamp). valid_unseen's 16 games (8 a
half: the gradings are most of the smoke's cost) are new layout seeds of the same goals; with four places at most per
type, they are layouts some train game has too. Its base model
(SMOKE_MODEL) is a tiny Qwen2 whose output layer was trained for a few seconds to answer every step with "inventory",
as a base that answers and stops: it wins no game, and since it ends each action with a newline its 50-step games
cost little.
"""

import json
import os
import random
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm
# The stand-in's game engine, by its own name: the games are the stand-in's even where the real alfworld is installed.
sys.path.append(os.path.join(TASKS, "hflm", "standins", "alfworld"))

SMOKE_MODEL = "a2rl-fixture/smoke-alfworld"
DATA = "alfworld"  # the snapshot's copy of $ALFWORLD_DATA
PROMPTS = "github/ysymyth/ReAct/prompts/alfworld_3prompts.json"
COUNTS = {"default": {"train": 8, "valid_unseen": 4}, "smoke": {"train": 300, "valid_unseen": 16}}
# No openable receptacle (ALFWorld's cabinets and drawers start closed): a smoke episode stays within 9 steps.
SMOKE_RECEPTACLES = ["countertop", "desk", "dresser", "shelf"]
# A smoke game not won after this many steps ends (the stand-in's step_limit; the env's own is the reference's 50):
# twice the expert's longest episode, so that a game a policy loses costs 20 steps of the grading, not 50.
SMOKE_STEP_LIMIT = 20
# The smoke profile's one goal per task type (object, destination): what a game asks is its type's, so the model
# learns to search, take what it finds and treat and place it by the type, never to copy words from the goal line (a
# 2-layer model did not within minutes). pick_two has prompt examples (the prompt file is ReAct's full set) and no
# games: its second object, "mug 2", was the one copy from the feedback the model kept getting wrong.
SMOKE_GOALS = {"pick_and_place": ("book", "desk"), "pick_clean_then_place": ("plate", "countertop"),
               "pick_heat_then_place": ("egg", "shelf"), "pick_cool_then_place": ("lettuce", "dresser"),
               "look_at_obj_in_light": ("pen", None), "pick_two_obj_and_place": ("vase", "desk")}
SMOKE_GAME_TYPES = [t for t in SMOKE_GOALS if t != "pick_two_obj_and_place"]
PROMPT_CANDIDATES = {"default": 12, "smoke": 40}
TYPE_NAMES = {  # micro-alfworld's task type -> ALFWorld's
    "pick_and_place": "pick_and_place_simple", "look_at_obj_in_light": "look_at_obj_in_light",
    "pick_clean_then_place": "pick_clean_then_place_in_recep", "pick_heat_then_place": "pick_heat_then_place_in_recep",
    "pick_cool_then_place": "pick_cool_then_place_in_recep", "pick_two_obj_and_place": "pick_two_obj_and_place",
}
WRONG_ACTION = "inventory"
# The smoke model: 2 layers of width 96, attending to the whole prompt (hflm.tiny). With a 128-token window it lost the
# goal's type after a few steps (4 of 24 won); at width 64 it learnt the actions' form but not what to name (1 of 24).
SMOKE_HIDDEN = 96
# The base learns WRONG_ACTION in its output layer only: trained whole, even 15 steps left it a far worse start for
# the oracle's warm-up (loss 0.58 per action token after 120 steps, against 0.09 from the random model).
BASE_STEPS, BASE_TRAINABLE, BASE_LR = 30, ["lm_head.weight"], 1e-2


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
    if fixed:  # the destination listed first, so searched last: the object never lies there, and the search is shorter
        searchable = sorted(SMOKE_RECEPTACLES, key=lambda r: r != dest)
    else:
        others = [r for r in world.SEARCHABLE if r not in (dest, world.LAMP_AT)]
        searchable = sorted({world.LAMP_AT, *([dest] if dest else []), *rng.sample(others, world.N_SEARCHABLE - 2)})
        searchable = searchable[: world.N_SEARCHABLE]
    appliances = [world.APPLIANCES[k] for k in ("heat", "cool", "clean")]
    # Appliances first: the expert searches from the end of the listing, as upstream's does where no prior applies.
    receptacles = [f"{r} 1" for r in appliances + searchable]
    contents = {r: [] for r in receptacles}
    contents[f"{world.LAMP_AT} 1"].append("desklamp 1")
    places = [f"{r} 1" for r in searchable if r != dest]  # never where it must go: the game would start won
    copies = 2 if task_type == "pick_two_obj_and_place" else 1
    for n, place in enumerate(rng.sample(places, copies), start=1):
        contents[place].append(f"{obj} {n}")
    if not fixed:  # the smoke profile's rooms hold only the goal's objects (and the lamp)
        for other in rng.sample([o for o in world.ALL_OBJECTS if o != obj], rng.randint(1, 3)):
            contents[rng.choice([f"{r} 1" for r in searchable])].append(f"{other} 1")
    game = {"task_type": TYPE_NAMES[task_type], "object": obj, "destination": f"{dest} 1" if dest else None,
            "receptacles": receptacles, "contents": contents}
    return {**game, "step_limit": SMOKE_STEP_LIMIT} if fixed else game


def triples(world, fixed):
    """Every (task type, object, destination) of micro-alfworld's vocabulary (look tasks: no destination)."""
    if fixed:
        return list((task_type, *goal) for task_type, goal in SMOKE_GOALS.items())
    out = []
    for task_type in world.TASK_TYPES:
        for obj in world.OBJECTS[task_type]:
            if task_type == "look_at_obj_in_light":
                out.append((task_type, obj, None))
            else:
                out += [(task_type, obj, d) for d in world.DESTINATIONS if d != world.LAMP_AT]
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
    # ALFWorld's unseen split is out of distribution: its triples are never train's. The smoke profile has one goal per
    # task type, so its splits share them and differ by where the objects lie (each game's layout seed).
    playable = [c for c in combos if c[0] in SMOKE_GAME_TYPES]
    held_out, seen = (playable, playable) if fixed else (combos[: len(combos) // 4], combos[len(combos) // 4:])
    root = os.path.join(hub_dir, DATA)
    shutil.rmtree(root, ignore_errors=True)  # the smoke profile's games replace the default ones fixture_hub writes first
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
        of_type = [c for c in (combos if fixed else seen) if c[0] == task_type]
        # The shortest of a few candidates: the examples are in every prompt, and a grading reads them at every step.
        candidates = [make_game(world, random.Random(f"{profile}-prompt-{key}-{n}"), *of_type[n % len(of_type)], fixed)
                      for n in range(PROMPT_CANDIDATES[profile])]
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
    from household import Household

    from hflm import alfworld, tiny

    # Prompts as the grader builds them, after some of the expert's steps or some WRONG_ACTION steps (what the base
    # plays), each to be answered WRONG_ACTION.
    contexts = []
    for n, game in enumerate(train_games[:24]):
        house = Household(game)
        opening, steps = expert_episode(game)
        key = alfworld.prompt_key(game["task_type"])
        prompt = alfworld.react_prompt(prompts, key) + alfworld.initial_observation(opening) + "\n>"
        for t in range(len(steps) + 1):
            contexts.append(alfworld.step_prompt(prompt, [a for a, _ in steps[:t]], [o for _, o in steps[:t]]))
        house.reset()
        contexts.append(alfworld.step_prompt(prompt, [WRONG_ACTION] * n, [house.step(WRONG_ACTION)] * n))
    # The tokenizer learns the base's own steps too (the last contexts hold two games of 22 and 23 WRONG_ACTION steps):
    # a 50-step game of "inventory" spelt letter by letter grew the prompt by 24 tokens a step, and the grading's
    # attention is quadratic in it.
    transcripts = [example_text(g) for g in train_games[:200]]
    texts = list(prompts.values()) + transcripts + [alfworld.react_prompt(prompts, "put")] + contexts[-24:]
    tiny.build(model_dir, texts, seed=0, vocab_size=768, hidden_size=SMOKE_HIDDEN, layers=2)
    answer_every_step(model_dir, contexts, f" {WRONG_ACTION}\n", steps=BASE_STEPS, lr=BASE_LR, trainable=BASE_TRAINABLE)


def answer_every_step(model_dir, contexts, answer, steps=30, seed=0, **fit_options):
    """Trains the model in model_dir, in place, to complete each text context with `answer` (loss on it only)."""
    from transformers import AutoTokenizer

    from hflm import tiny

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    target = tokenizer(answer, add_special_tokens=False)["input_ids"]
    rows = []
    for context in contexts:
        ids = tokenizer(context, add_special_tokens=False)["input_ids"]
        rows.append((ids + target, [-100] * len(ids) + target))
    tiny.fit(model_dir, rows, steps, batch_size=8, seed=seed, **fit_options)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--profile", choices=sorted(COUNTS), default="default")
    args = parser.parse_args()
    write(args.dir, args.profile)
