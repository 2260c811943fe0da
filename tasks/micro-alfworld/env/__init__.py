"""micro_alfworld: ALFWorld-style text households for the micro-alfworld task (level 3, interactive).

    from micro_alfworld import make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)     # game: one line of data/train.jsonl
    obs, reward, done, info = env.step("search")

A game is {"seed": int, "task_type": str, "object": str, "destination": str}. The seed fixes the layout:
six searchable receptacles (always a desk, which holds the lamp) in a fixed search order, three appliances
(microwave, fridge, sinkbasin), the goal object(s) and 3-6 other objects. Task types (ALFWorld's six):
    pick_and_place          put a mug in cabinet
    pick_clean_then_place   put a clean mug in cabinet      (clean it at the sinkbasin first)
    pick_heat_then_place    put a hot mug in cabinet        (heat it at the microwave first)
    pick_cool_then_place    put a cool mug in cabinet       (cool it at the fridge first)
    look_at_obj_in_light    look at mug under the lamp      (hold it at the desk and use the lamp)
    pick_two_obj_and_place  put two mugs in cabinet         (one at a time)

Observation (one line, at most about 150 characters, everything the next action needs):
    at: countertop | see: mug, 2 others | holding: nothing | unchecked: 4 | goal: put a hot mug in cabinet
"at" is where the agent stands, marked "(goal)" when that is the goal's destination (the desk, in a look task);
"see" names the goal object when it is here and counts the other objects; "holding" is the object in hand with
its state ("hot mug"); "unchecked" counts the searchable receptacles not visited yet. After an invalid action the observation starts with
"Nothing happens. ", after the last action of a failed or won episode with "You failed. " / "You won. ".

Actions (one line; info["admissible"] lists the valid ones in the current state):
    search        go to the next receptacle not visited yet (invalid when none is left)
    go <place>    go to a receptacle or appliance, e.g. "go microwave"
    take          pick up the goal object, if it is here and the hand is empty
    put           put the held object down here
    heat | cool | clean    treat the held object, at the microwave | fridge | sinkbasin
    use lamp      switch on the lamp, at the desk
Rules: success (reward 1.0, done) when the goal is reached. Putting the goal object down anywhere but the goal's
destination, or at the destination without the treatment the goal asks for (or at all, in a look task), ends the
episode as a failure; so do 5 invalid actions in a row and the 50-step cap (MAX_STEPS). Rewards are 0 otherwise.
info always has "task_type" and "admissible"; once done it also has "success".

format_prompt(obs) is obs + "\\n> "; the action is the first line of the completion (at most MAX_NEW_TOKENS
characters).
Play episodes with a checkpoint as policy:

    python3 -m micro_alfworld.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 256 --group-size 8 --out FILE
"""

from .prompt import format_prompt
from .world import MAX_STEPS, TASK_TYPES, AlfworldEnv, goal_text, parse

MAX_NEW_TOKENS = 16  # the longest action, "go coffeetable", is 14 characters


def make_env():
    """A fresh environment; call reset(seed, options=game) before stepping."""
    return AlfworldEnv()


__all__ = ["AlfworldEnv", "MAX_NEW_TOKENS", "MAX_STEPS", "TASK_TYPES", "format_prompt", "goal_text", "make_env", "parse"]
