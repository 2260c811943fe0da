"""The scripted expert of micro-webshop and the base model's demonstrator, for pretraining and the tests only.

This module lives at the task root, outside env/, on purpose: env/ is mounted in the agent's sandbox as
lib/micro_webshop, and a policy that solves every game there could be imported and cloned by supervised learning,
bypassing the online loop the task measures. pretrain.py and tests/test_micro_webshop.py import it from here:

    sys.path.insert(0, <task dir>)          # a script in the task dir has it already
    from expert import expert, habit_policy, habit_expert

It needs the env package importable as micro_webshop.
"""

import re

from micro_webshop import parse

_RESULT = re.compile(r"\[(\d+)\] (\w+ \w+ \w+) \$(\d+)")


def expert(observation):
    """The scripted expert: a function of the current observation alone (Markov) that solves every game.

    search page -> search[<colour> <material> <type>]; results -> click[i] of the product named exactly so and under
    budget (click[back] if none); product page -> click[back] if it is not that product, else click[<size>], then click[buy].
    """
    goal, page = parse(observation)
    if goal is None:
        return "click[back]"
    query = f"{goal['colour']} {goal['material']} {goal['type']}"
    if page == "search":
        return f"search[{query}]"
    if page.startswith("[") or page == "no results":
        for index, name, price in _RESULT.findall(page):
            if name == query and int(price) < goal["budget"]:
                return f"click[{index}]"
        return "click[back]"
    if page.startswith("bought"):
        return "click[back]"
    if not page.startswith(query + " $"):
        return "click[back]"
    chosen = re.search(r" chosen: (\w+)$", page)
    if chosen and chosen.group(1) == goal["size"]:
        return "click[buy]"
    return f"click[{goal['size']}]"


def habit_policy(observation, q):
    """The demonstrator the base model learned to imitate, as a list of (action, probability).

    It is the expert, except at the two choices of a purchase. Which result to open: the expert's with
    probability q, otherwise always the first (click[1]). Which size to pick (product page, no size chosen yet):
    the wanted size with probability q, otherwise the first size listed. It never goes back: whatever product it
    opened, it picks a size and buys.
    """
    goal, page = parse(observation)
    if goal is None or page == "search":
        return [(expert(observation), 1.0)]
    if page.startswith("["):
        choices = [(expert(observation), q), ("click[1]", 1.0 - q)]
    elif " chosen: " in page:
        return [("click[buy]", 1.0)]
    else:
        sizes = page.split(" sizes: ", 1)[1].split()
        wanted = f"click[{goal['size']}]" if goal["size"] in sizes else f"click[{sizes[0]}]"
        choices = [(wanted, q), (f"click[{sizes[0]}]", 1.0 - q)]
    merged = {}
    for action, p in choices:
        merged[action] = merged.get(action, 0.0) + p
    return list(merged.items())


def habit_expert(observation, rng, q):
    """One action sampled from habit_policy(observation, q) with random.Random rng."""
    r, total = rng.random(), 0.0
    choices = habit_policy(observation, q)
    for action, p in choices:
        total += p
        if r < total:
            return action
    return choices[-1][0]
