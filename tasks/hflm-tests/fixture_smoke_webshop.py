"""webshop's fixture snapshot: a clothing catalogue in WebShop's data files, and a tiny model that answers at once.

    from fixture_smoke_webshop import write, write_tiny_model
    write(hub_dir)                  # the data files hflm.assets prepare webshop / webshop-human --from DIR reads
    write_tiny_model(hub_dir)       # TINY_MODEL, for tests of form

What `hflm.assets prepare webshop --from DIR` reads (the layout of WebShop's data/ folder, as its setup.sh fills it):

    DIR/github/princeton-nlp/WebShop/data/items_shuffle.json        the product set: a list of scraped products
        ({"asin", "name", "full_description", "small_description", "pricing", "customization_options", "images",
        "category", "query", "product_category"}, as upstream's load_products reads them)
    DIR/github/princeton-nlp/WebShop/data/items_shuffle_1000.json   its first 1,000 products
    DIR/github/princeton-nlp/WebShop/data/items_ins_v2.json, items_ins_v2_1000.json   per asin: "attributes",
        "instruction", "instruction_attributes" (what upstream's synthetic goals are made of)
    DIR/github/princeton-nlp/WebShop/data/items_human_ins.json      per asin: [{"instruction", "instruction_attributes",
        "instruction_options"}] (human goals), for half of the products

The products are micro-webshop's clothes (tasks/micro-webshop/env/shop.py: its colours, materials and types; sizes
named as upstream's shops name them):
"<Brand> <Material> <Type> for Everyday Wear", options color (three colours) and size (three sizes), so that a
synthetic goal reads as upstream's do: "i need a cotton shirt from kalo with color: red, and size: medium, and price
lower than 40.00 dollars". 2,400 products (80 brands), so that webshop-human's 500 evaluation goals and their decoys leave
train goals, as the real set does.
"""

import hashlib
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm
sys.path.append(os.path.join(TASKS, "hflm", "standins"))  # web_agent_site: after site-packages, a real one wins

DATA = "github/princeton-nlp/WebShop/data"
COLOURS = ("red", "blue", "green", "black", "white", "grey")
MATERIALS = ("cotton", "wool", "linen", "silk", "denim")
TYPES = ("shirt", "dress", "coat", "jacket", "sweater", "skirt")
SIZES = ("small", "medium", "large", "x-large")
SYLLABLES = ("ka", "lo", "mi", "ru", "ze", "no", "ta", "vi", "so", "pe")
N_BRANDS = 80
TINY_MODEL = "a2rl-fixture/tiny-webshop"
# A vocabulary that holds the shop's words and asins whole: a prompt (five pages of history) is then about 1k tokens.
VOCAB = 2048
WINDOW = 64
SMOKE_MODEL, SMOKE_HIDDEN = "a2rl-fixture/smoke-webshop", 64
FIXED_QUERY = "wool coat"


def brands():
    names = sorted({(a + b).capitalize() for a in SYLLABLES for b in SYLLABLES if a != b})
    return random.Random("webshop-brands").sample(names, N_BRANDS)


def asin(brand, material, type_):
    return "B0" + hashlib.sha256(f"{brand}-{material}-{type_}".encode()).hexdigest()[:8].upper()


def catalogue():
    """(products, synthetic attributes, human instructions), in upstream's file formats."""
    rng = random.Random("webshop-fixture")
    products, attributes, human = [], {}, {}
    # A price per kind of clothing, each brand's within $4 of it: any brand's wool coat is under a wool coat goal's bound.
    kind_price = {(m, t): rng.randint(15, 55) for m in MATERIALS for t in TYPES}
    for brand in brands():
        for material in MATERIALS:
            for type_ in TYPES:
                colours = sorted(rng.sample(COLOURS, 3), key=COLOURS.index)
                sizes = sorted(rng.sample(SIZES, 3), key=SIZES.index)
                price = kind_price[material, type_] + rng.randint(0, 400) / 100
                code = asin(brand, material, type_)
                products.append({
                    "asin": code, "name": f"{brand} {material.capitalize()} {type_.capitalize()} for Everyday Wear",
                    "full_description": f"A {material} {type_} by {brand}, made to last.",
                    "small_description": [f"{material.capitalize()} fabric", "Machine wash cold"],
                    "pricing": f"${price:.2f}",
                    "customization_options": {"Color": [{"value": c.capitalize(), "image": None} for c in colours],
                                              "Size": [{"value": s.capitalize(), "image": None} for s in sizes]},
                    "images": [f"https://example.invalid/{code}.jpg"], "category": "fashion", "query": type_,
                    "product_category": f"Clothing, Shoes & Jewelry › Women › Clothing › {type_.capitalize()}s",
                })
                attributes[code] = {"attributes": [material, "machine wash"], "instruction": f"i need a {material} {type_} from {brand.lower()}",
                                    "instruction_attributes": [material]}
                if rng.random() < 0.5:
                    colour, size = rng.choice(colours), rng.choice(sizes)
                    human[code] = [{"instruction": f"I am looking for a {colour} {material} {type_} by {brand} in size {size}.",
                                    "instruction_attributes": [material], "instruction_options": [colour, size]}]
    rng.shuffle(products)  # upstream's product file is shuffled; items_shuffle_1000 is its head
    return products, attributes, human


def write(hub_dir):
    """Writes WebShop's data files into hub_dir; returns hub_dir."""
    products, attributes, human = catalogue()
    first = {p["asin"] for p in products[:1000]}
    files = {
        "items_shuffle.json": products, "items_shuffle_1000.json": products[:1000], "items_ins_v2.json": attributes,
        "items_ins_v2_1000.json": {a: v for a, v in attributes.items() if a in first}, "items_human_ins.json": human,
    }
    folder = os.path.join(hub_dir, DATA)
    os.makedirs(folder, exist_ok=True)
    for name, value in files.items():
        with open(os.path.join(folder, name), "w") as f:
            json.dump(value, f)
    return hub_dir


def texts_of(products):
    """What the tokenizer of a fixture model learns from: the reference's prompt around the shop's pages."""
    from hflm import webshop

    sample = products
    pages = [" [SEP] ".join([p["asin"], p["name"], p["pricing"], "Price:", "Rating: N.A.", "Buy Now", "Back to Search",
                             "Next >", "< Prev", "Description", "Features", "Reviews", "Instruction:", "WebShop", "Search"])
             for p in sample]
    prompt = webshop.react_prompt("i need a cotton shirt with color: red, and size: medium", [("search[cotton shirt]", pages[0])],
                                  pages[1], webshop.format_available_actions({"has_search_bar": True, "clickables": ["buy now"]}))
    return pages + [prompt, webshop.SYSTEM] + [p["full_description"] for p in sample]


def scripted_episodes(hub_dir, n_goals, query=FIXED_QUERY):
    """Episodes of the first n_goals goals of the webshop env over hub_dir's data, each buying the same product: the
    search for `query`, its first result, Buy Now (three steps, whatever the goal)."""
    import shutil
    import tempfile

    from hflm import webshop, webshop_assets

    variant = webshop.VARIANTS["webshop"]
    root = tempfile.mkdtemp(prefix="webshop-root-")
    try:
        os.makedirs(os.path.join(root, "data"))
        for name in (variant.products, variant.attributes, webshop.ATTRIBUTES_HUMAN):
            shutil.copyfile(os.path.join(hub_dir, DATA, name), os.path.join(root, "data", name))
        webshop_assets.write_index_documents(root, variant)
        env = webshop.open_server(root, variant)
        script = [f"search[{query}]", f"click[{env.server.search_engine.search(query, 1)[0].lower()}]", "click[buy now]"]
        played = []

        def complete(chats):
            played.append(len(chats))
            return [script[len(played) - 1]] * len(chats)

        return webshop.play(env, list(range(n_goals)), complete, variant, max_steps=len(script))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def write_tiny_model(hub_dir, model_id=TINY_MODEL, hidden_size=32, layers=1):
    """A Qwen2 of `layers` layers of width `hidden_size` into the hub folder holding the data files (TINY_MODEL: one of
    width 32), whose tokenizer knows the shop's words, each layer attending to its last 64 tokens (the end of the
    current page), trained to buy one fixed product in three steps whatever the goal (scripted_episodes): an episode
    costs three cheap steps and is seldom a success, where a model that never buys would play 50 steps of prompts 3k
    tokens long. Returns the model id."""
    from transformers import AutoTokenizer

    from hflm import tiny, webshop

    with open(os.path.join(hub_dir, DATA, "items_shuffle_1000.json")) as f:
        products = json.load(f)
    model_dir = os.path.join(hub_dir, "models", model_id)
    tiny.build(model_dir, texts_of(products), seed=0, vocab_size=VOCAB, hidden_size=hidden_size, layers=layers,
               sliding_window=WINDOW)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = []
    for episode in scripted_episodes(hub_dir, 12):
        for t, action in enumerate(episode["actions"]):
            chat = tokenizer.apply_chat_template(webshop.step_messages(episode, t), tokenize=False, add_generation_prompt=True)
            # Only the last layers * 64 tokens reach the answer (the windows; positions are relative): cut there.
            ids = tokenizer(chat, add_special_tokens=False)["input_ids"][-layers * WINDOW - 64:]
            target = tokenizer(action + "\n", add_special_tokens=False)["input_ids"]
            rows.append((ids + target, [-100] * len(ids) + target))
    tiny.fit(model_dir, rows, steps=150, batch_size=6)
    return model_id


def write_smoke_model(hub_dir):
    """SMOKE_MODEL, the smoke profile's base: as TINY_MODEL, two layers of width 64 (room to learn the shop)."""
    return write_tiny_model(hub_dir, SMOKE_MODEL, hidden_size=SMOKE_HIDDEN, layers=2)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--tiny-model", action="store_true", help="also write TINY_MODEL")
    args = parser.parse_args()
    write(args.dir)
    if args.tiny_model:
        write_tiny_model(args.dir)
