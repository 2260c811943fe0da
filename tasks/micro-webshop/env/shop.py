"""The micro-webshop environment: one shopping instruction, a small catalogue, search / results / product pages.

A game is {"seed": int, "colour": str, "material": str, "type": str}; the instruction's product comes from the
game (or from the seed when a field is missing); its size, budget, the catalogue and the prices come from the seed.
"""

import random
import re

COLOURS = ("red", "blue", "green", "black", "white", "grey")
MATERIALS = ("cotton", "wool", "linen", "silk", "denim")
TYPES = ("shirt", "dress", "coat", "jacket", "sweater", "skirt")
SIZES = ("s", "m", "l", "xl")
BUDGETS = (20, 30, 40, 50, 60)
MAX_STEPS = 8
P_TOP = 0.25  # share of games whose right query finds the wanted product alone
WRONG_SIZE_FACTOR = 0.45  # reward multiplier for the wrong size: below 0.5, so a wrong size never succeeds

NOTHING = "nothing happens. "
_ACTION = re.compile(r"^(search|click)\[([^\[\]]*)\]$")


def product_name(p):
    return f"{p['colour']} {p['material']} {p['type']}"


def purchase_reward(product, size, goal):
    """The micro analogue of WebShop's reward, in [0, 1].

    0 if the product type is wrong; otherwise the share of {colour, material, price under budget} that match,
    times 1 for the wanted size or WRONG_SIZE_FACTOR (0.45) for another. Success is reward >= 0.5: it needs the
    wanted size and at least two of the three; the catalogues hold only one product of the wanted type with two or
    more of them (the wanted product itself), so success means the right product in the right size.
    """
    if product["type"] != goal["type"]:
        return 0.0
    share = (
        (product["colour"] == goal["colour"]) + (product["material"] == goal["material"]) + (product["price"] < goal["budget"])
    ) / 3.0
    return round(share * (1.0 if size == goal["size"] else WRONG_SIZE_FACTOR), 4)


def _pick_other(rng, values, avoid):
    return rng.choice([v for v in values if v != avoid])


def make_game(seed, options=None):
    """(goal, catalogue) of a game: the goal holds colour, material, type, size and budget; catalogue a list of products."""
    options = options or {}
    rng = random.Random(f"micro-webshop:{seed}")
    goal = {
        "colour": options.get("colour") or rng.choice(COLOURS),
        "material": options.get("material") or rng.choice(MATERIALS),
        "type": options.get("type") or rng.choice(TYPES),
    }
    for key, values in (("colour", COLOURS), ("material", MATERIALS), ("type", TYPES)):
        if goal[key] not in values:
            raise ValueError(f"unknown {key} {goal[key]!r}: one of {', '.join(values)}")
    budget = rng.choice(BUDGETS)
    target_sizes = sorted(rng.sample(SIZES, 3), key=SIZES.index)
    goal["size"] = rng.choice(target_sizes)
    goal["budget"] = budget
    used_prices = set()

    def price(lo, hi):
        while True:
            p = rng.randint(lo, hi)
            if p not in used_prices:
                used_prices.add(p)
                return p

    def sizes():
        return sorted(rng.sample(SIZES, rng.randint(2, 4)), key=SIZES.index)

    target = dict(goal_fields(goal), price=price(budget - 9, budget - 1), sizes=target_sizes)
    products, names = [target], {product_name(target)}

    def add(colour, material, type_, lo, hi):
        p = {"colour": colour, "material": material, "type": type_}
        if product_name(p) in names:
            return False
        names.add(product_name(p))
        p.update(price=price(lo, hi), sizes=sizes())
        products.append(p)
        return True

    # Up to three near matches (two of the three query words each), all over budget: with the wanted product they
    # make the results page of the right query, which sorts them by price, highest first, so the wanted product
    # comes last. In a share P_TOP of the games there is none, and the wanted product is the only result.
    near = 0 if rng.random() < P_TOP else rng.randint(1, 3)
    while len(products) < 1 + near:
        kind = rng.choice("ABC")
        if kind == "A":  # same colour and material, another type: wrong type, reward 0
            add(goal["colour"], goal["material"], _pick_other(rng, TYPES, goal["type"]), budget + 1, budget + 30)
        elif kind == "B":  # same colour and type, another material: 1/3
            add(goal["colour"], _pick_other(rng, MATERIALS, goal["material"]), goal["type"], budget + 1, budget + 30)
        else:  # another colour, same material and type: 1/3
            add(_pick_other(rng, COLOURS, goal["colour"]), goal["material"], goal["type"], budget + 1, budget + 30)
    # More products, sharing no word with the query: a catalogue of 8.
    while len(products) < 8:
        c, m, t = rng.choice(COLOURS), rng.choice(MATERIALS), rng.choice(TYPES)
        if c != goal["colour"] and m != goal["material"] and t != goal["type"]:
            add(c, m, t, 10, 90)
    rng.shuffle(products)
    return goal, products


def goal_fields(goal):
    return {"colour": goal["colour"], "material": goal["material"], "type": goal["type"]}


def search(catalogue, query):
    """The first results page: the 4 products sharing most words with the query (ties: catalogue order), by price, highest first."""
    words = set(query.split())
    scored = [(-len(words & {p["colour"], p["material"], p["type"]}), i) for i, p in enumerate(catalogue)]
    hits = [catalogue[i] for score, i in sorted(scored) if score < 0][:4]
    return sorted(hits, key=lambda p: -p["price"])


class WebShopEnv:
    """Gym-style text environment; see the package docstring for the pages and the action grammar."""

    def reset(self, seed, options=None):
        self.goal, self.catalogue = make_game(seed, options)
        self.header = f"{self.goal['colour']} {self.goal['material']} {self.goal['type']}, size {self.goal['size']}, under ${self.goal['budget']}"
        self.page, self.results, self.product, self.size, self.done = "search", [], None, None, False
        return self._observation(), self._info()

    def query(self):
        """The right query: the instruction's product words."""
        return f"{self.goal['colour']} {self.goal['material']} {self.goal['type']}"

    def admissible(self):
        if self.done:
            return []
        if self.page == "search":
            return [f"search[{self.query()}]"]
        if self.page == "results":
            return [f"click[{i + 1}]" for i in range(len(self.results))] + ["click[back]"]
        return [f"click[{s}]" for s in self.product["sizes"]] + (["click[buy]"] if self.size else []) + ["click[back]"]

    def _info(self, **extra):
        return {"task_type": self.goal["type"], "admissible": self.admissible(), **extra}

    def _observation(self):
        if self.page == "search":
            page = "search"
        elif self.page == "results":
            page = " ".join(f"[{i + 1}] {product_name(p)} ${p['price']}" for i, p in enumerate(self.results)) or "no results"
        else:
            p = self.product
            page = f"{product_name(p)} ${p['price']} sizes: {' '.join(p['sizes'])}"
            if self.size:
                page += f" chosen: {self.size}"
        return f"{self.header} | {page}"

    def step(self, action):
        if self.done:
            raise RuntimeError("step after the episode ended: call reset")
        m = _ACTION.match(action.strip())
        kind, arg = (m.group(1), m.group(2).strip()) if m else (None, None)
        if kind == "search" and self.page == "search" and arg:
            self.results, self.page = search(self.catalogue, arg.lower()), "results"
        elif kind == "click" and arg == "back" and self.page != "search":
            self.page, self.size = ("search" if self.page == "results" else "results"), None
        elif kind == "click" and self.page == "results" and arg.isdigit() and 1 <= int(arg) <= len(self.results):
            self.product, self.page = self.results[int(arg) - 1], "product"
        elif kind == "click" and self.page == "product" and arg in self.product["sizes"]:
            self.size = arg
        elif kind == "click" and self.page == "product" and arg == "buy" and self.size:
            reward = purchase_reward(self.product, self.size, self.goal)
            self.done = True
            obs = f"{self.header} | bought {product_name(self.product)} size {self.size}: reward {reward:.2f}"
            return obs, reward, True, self._info(success=reward >= 0.5, reward=reward)
        else:
            return NOTHING + self._observation(), 0.0, False, self._info()
        return self._observation(), 0.0, False, self._info()


def make_env():
    """A fresh environment; call reset(seed, options=game) before stepping."""
    return WebShopEnv()


_HEADER = re.compile(r"^(?:nothing happens\. )?(\w+) (\w+) (\w+), size (\w+), under \$(\d+) \| (.*)$")


def parse(observation):
    """(goal, page text) of an observation, or (None, None) when it is not one of the shop's pages."""
    m = _HEADER.match(observation)
    if not m:
        return None, None
    colour, material, type_, size, budget, page = m.groups()
    return {"colour": colour, "material": material, "type": type_, "size": size, "budget": int(budget)}, page
