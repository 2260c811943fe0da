"""The scripted expert of micro-alfworld and the habit-mixed demonstrator that pretrain.py imitates.

Developer-only: this file sits at the task root, outside env/, so it is not mounted in the agent's sandbox
(env/ becomes /workspace/lib/micro_alfworld there). An agent that could import a policy solving every game
could clone it by supervised learning and bypass the online loop the task measures.

    import sys; sys.path.insert(0, "<this task's folder>")   # plus the folder holding microlm and micro_alfworld
    from expert import expert, demonstrate

Used by pretrain.py (the base model) and tests/test_micro_alfworld.py (the expert solves every game).
"""

from micro_alfworld import MAX_STEPS, format_prompt, make_env, parse
from micro_alfworld.world import LAMP_AT

HABIT = "put"
STRAY = 0.04  # chance of an untrained stray move per step


def expert(obs):
    """The scripted expert: a function of the current observation alone; it solves every game."""
    f = parse(obs)
    words = f["goal"].split()
    if words[0] == "look":
        obj, dest, need = words[2], None, None
    elif words[1] == "two":
        obj, dest, need = words[2][:-1], words[-1], None
    else:
        need = words[2] if len(words) == 6 else None
        obj, dest = words[-3], words[-1]
    holding = f["holding"]
    if holding == "nothing":
        return "take" if obj in f["see"] else "search"
    state = holding.split()[0] if " " in holding else ""
    if need is not None and state != need:
        place = {"hot": "microwave", "cool": "fridge", "clean": "sinkbasin"}[need]
        if f["at"] != place:
            return f"go {place}"
        return {"hot": "heat", "cool": "cool", "clean": "clean"}[need]
    if dest is None:
        return "use lamp" if f["at"] == LAMP_AT else f"go {LAMP_AT}"
    return "put" if f["at"] == dest else f"go {dest}"


def demonstrate(game, q, rng):
    """One habit-mixed episode; returns its (prompt, action) pairs (stray moves left out)."""
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)
    pairs = []
    for _ in range(MAX_STEPS):
        action = expert(obs)
        if rng.random() < STRAY:
            stray = rng.choice(["take", "heat", "search"] + [a for a in info["admissible"] if a.startswith("go ")])
            obs, _, done, info = env.step(stray)
            if done:
                break
            continue
        held = parse(obs)["holding"]
        if held != "nothing" and " " not in held and action.startswith("go ") and rng.random() >= q:
            action = HABIT
        pairs.append((format_prompt(obs), action))
        obs, _, done, info = env.step(action)
        if done:
            break
    return pairs
