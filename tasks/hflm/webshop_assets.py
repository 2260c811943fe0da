"""webshop's assets: WebShop's product set split into visible train goals and hidden evaluation goals.

    PYTHONPATH=tasks .venv-full/bin/python -m hflm.assets prepare webshop --home ~/.a2rl [--model ID] [--from DIR]
    PYTHONPATH=tasks .venv-full/bin/python -m hflm.assets prepare webshop-human --home ~/.a2rl [--from DIR]

hflm.assets hands both tasks here (GAME_TASKS); the home layout, manifests and model import are its own. Writes, for
a variant of hflm.webshop.VARIANTS (webshop: the 1,000-product set and synthetic goals; webshop-human: the whole set
and human goals):

    <home>/assets/<task>/data/webshop/data/<products, attributes, items_human_ins.json>   visible: a WebShop root
    <home>/assets/<task>/data/webshop/search_engine/<resources>/documents.jsonl           upstream's index documents
    <home>/assets/<task>/data/train.jsonl        one row per goal of the visible root: {"goal_index", "instruction_text", "asin"}
    <home>/assets/<task>/eval/webshop/...        hidden: the same root with every instruction, the grader's env
    <home>/assets/<task>/eval/{public,private}.jsonl   the evaluation goals' rows, halved
    <home>/assets/<task>/manifest.json           sha256 and bytes of every file, the sources, the rules

The evaluation goals are the variant's: goals [0, eval_goals) of upstream's env over the whole files (its goal list,
shuffled with seed 233; prices from hflm.webshop.GOAL_SEED), ranked by sha256 of their instruction text, even ranks
public, odd private. The visible root is the same product set, searchable and buyable, whose attribute files hold no
instruction (synthetic or human) of an evaluation goal's product, nor of as many decoy products (ranked by sha256 of
their asin), so that the products without instructions do not name the evaluation's: an env over it generates
only goals of other products, and those are the train goals. upstream's index documents are written as its
search_engine/convert_product_file_format.py writes them ({"id", "contents"}; not the product copy it adds), for
both roots; pyserini's Lucene index over them is not built here (the stand-in searches the documents themselves).

Sources, from DIR (--from) or, with internet, downloaded into <home>/hub-snapshot/ in the same layout:
    DIR/github/princeton-nlp/WebShop/data/items_shuffle_1000.json, items_ins_v2_1000.json, items_human_ins.json
        (webshop-human: items_shuffle.json, items_ins_v2.json too): what WebShop's setup.sh downloads with gdown
    DIR/models/<model id>/                               the base model, as for every full task
"""

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import urllib.request

from hflm import assets, webshop
from hflm.folders import built_aside

# The model the reference's README runs its interactive tasks with; its eval sends chats, so an instruct model.
DEFAULT_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
DATA = "github/princeton-nlp/WebShop/data"
# WebShop's setup.sh: Google Drive ids of the data files.
DRIVE_IDS = {
    "items_shuffle_1000.json": "1EgHdxQ_YxqIQlvvq5iKlCrkEKR6-j0Ib",
    "items_ins_v2_1000.json": "1IduG0xl544V_A_jv3tHXC0kyFi7PnyBu",
    "items_shuffle.json": "1A2whVgOO0euk5O13n2iYDM0bQRkkRduB",
    "items_ins_v2.json": "1s2j6NgHljiZzQNL3veZaAiyW_qDEgBNi",
    "items_human_ins.json": "14Kb5SPBk_jfdLZ_CDBNitW98QLDlKR5O",
}
INSTRUCTION_KEYS = ("instruction", "instruction_attributes")


def ensure_env_package():
    """web_agent_site importable: the real package where installed, else the stand-in (as the server mounts it)."""
    try:
        import web_agent_site  # noqa: F401
    except ImportError:
        sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins"))


def source_files(variant):
    return [variant.products, variant.attributes, webshop.ATTRIBUTES_HUMAN]


def read_json(path, kind):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise assets.AssetsError(f"{path} is missing: copy WebShop's data file there (its setup.sh downloads it with "
                                 f"gdown {DRIVE_IDS[os.path.basename(path)]})") from None
    except ValueError as e:
        raise assets.AssetsError(f"{path} is not valid JSON ({e}): download it again") from None
    if not isinstance(value, kind):
        raise assets.AssetsError(f"{path} holds no JSON {kind.__name__}: is it WebShop's {os.path.basename(path)}?")
    return value


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)


def write_index_documents(root, variant):
    """<root>/search_engine/<resources>/documents.jsonl as upstream's convert_product_file_format.py writes them."""
    from web_agent_site.engine import engine

    webshop.configure(root, variant)
    products, *_ = engine.load_products(os.path.join(root, "data", variant.products), num_products=variant.num_products)
    path = os.path.join(root, "search_engine", webshop.INDEX_RESOURCES[variant.num_products], "documents.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in products:
            options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in p.get("options", {}).items())
            contents = " ".join([p["Title"], p["Description"], p["BulletPoints"][0], options]).lower()
            f.write(json.dumps({"id": p["asin"], "contents": contents}, ensure_ascii=False) + "\n")


def goal_rows(root, variant):
    """One row per goal of upstream's env over root, in the env's order (the row's place is its goal_index)."""
    env = webshop.open_server(root, variant)
    return [{"goal_index": i, "instruction_text": g["instruction_text"], "asin": g["asin"]} for i, g in enumerate(env.server.goals)]


def hidden_asins(eval_rows, products):
    """The evaluation goals' products and as many decoys (other products ranked by sha256 of the asin)."""
    targets = {r["asin"] for r in eval_rows}
    others = sorted({p["asin"] for p in products} - targets, key=lambda a: (hashlib.sha256(a.encode()).hexdigest(), a))
    return targets | set(others[: len(targets)])


def write_visible_root(data_dir, visible_root, variant, attributes, human, hidden):
    """The agent's WebShop root: the products, and attribute files without the hidden products' instructions."""
    shutil.rmtree(visible_root, ignore_errors=True)
    os.makedirs(os.path.join(visible_root, "data"))
    shutil.copyfile(os.path.join(data_dir, variant.products), os.path.join(visible_root, "data", variant.products))
    write_json(os.path.join(visible_root, "data", variant.attributes),
               {asin: ({k: v for k, v in entry.items() if k not in INSTRUCTION_KEYS} if asin in hidden else entry)
                for asin, entry in attributes.items()})
    write_json(os.path.join(visible_root, "data", webshop.ATTRIBUTES_HUMAN),
               {asin: entry for asin, entry in human.items() if asin not in hidden})
    write_index_documents(visible_root, variant)


def build(snapshot, home, task, revisions=None):
    """Builds <home>/assets/<task>/ from a snapshot folder; returns the manifest."""
    ensure_env_package()
    variant = webshop.VARIANTS[task]
    data_dir = os.path.join(snapshot, DATA)
    products = read_json(os.path.join(data_dir, variant.products), list)
    attributes = read_json(os.path.join(data_dir, variant.attributes), dict)
    human = read_json(os.path.join(data_dir, webshop.ATTRIBUTES_HUMAN), dict)
    with built_aside(os.path.join(home, "assets", task)) as build_dir:
        hidden_root, visible_root = os.path.join(build_dir, "eval", "webshop"), os.path.join(build_dir, "data", "webshop")
        os.makedirs(os.path.join(hidden_root, "data"))
        for name in source_files(variant):
            shutil.copyfile(os.path.join(data_dir, name), os.path.join(hidden_root, "data", name))
        write_index_documents(hidden_root, variant)
        try:
            goals = goal_rows(hidden_root, variant)
        except (KeyError, TypeError, ValueError, AssertionError) as e:
            raise assets.AssetsError(f"{data_dir}: WebShop's env cannot build its goals from these files "
                                     f"({type(e).__name__}: {e}): download them again") from None
        eval_rows = goals[: variant.eval_goals]
        if len(eval_rows) < 2:
            raise assets.AssetsError(f"{data_dir}: the env makes {len(goals)} goal(s), too few to evaluate on: is "
                                     f"{variant.attributes} (or {webshop.ATTRIBUTES_HUMAN}) WebShop's?")
        evaluated = {r["instruction_text"] for r in eval_rows}
        hidden, train = hidden_asins(eval_rows, products), None
        for _ in range(5):
            write_visible_root(data_dir, visible_root, variant, attributes, human, hidden)
            train = goal_rows(visible_root, variant)
            # Another product's goal can read exactly as an evaluation goal: its product is hidden too, and the root rebuilt.
            same_text = {r["asin"] for r in train if r["instruction_text"] in evaluated}
            if not same_text:
                break
            hidden |= same_text
        if not train or same_text:
            raise assets.AssetsError(f"{data_dir}: no train goal is left once the evaluation's products are hidden "
                                     f"({len(train)} goals, {len(same_text)} reading as evaluation goals): the product "
                                     f"set is too small for {variant.eval_goals} evaluation goals")
        ranked = sorted(eval_rows, key=lambda r: (hashlib.sha256(r["instruction_text"].encode("utf-8")).hexdigest(), r["goal_index"]))
        halves = {"public": sorted(ranked[0::2], key=lambda r: r["goal_index"]),
                  "private": sorted(ranked[1::2], key=lambda r: r["goal_index"])}
        assets.write_jsonl(os.path.join(build_dir, "data", "train.jsonl"), train)
        for half, rows in halves.items():
            assets.write_jsonl(os.path.join(build_dir, "eval", f"{half}.jsonl"), rows)
        files = {}
        for root, _dirs, names in os.walk(build_dir):
            for name in sorted(names):
                path = os.path.join(root, name)
                files[os.path.relpath(path, build_dir).replace(os.sep, "/")] = assets.file_entry(path)
        manifest = {
            "task": task, "builder_version": assets.BUILDER_VERSION, "files": dict(sorted(files.items())),
            "goals": {"train": len(train), "public": len(halves["public"]), "private": len(halves["private"]),
                      "hidden_products": len(hidden)},
            "variant": dataclasses.asdict(variant), "goal_seed": webshop.GOAL_SEED,
            "sources": [{"role": "data", "path": f"{DATA}/{name}", "gdown": DRIVE_IDS[name],
                         "sha256": assets.sha256_file(os.path.join(data_dir, name)),
                         "revision": (revisions or {}).get(name)} for name in source_files(variant)],
            "public_private_rule": f"goals [0, {variant.eval_goals}) of the env over the whole files, ranked by sha256 of "
                                   "their instruction text (ties by goal index): even ranks public, odd private",
            "hidden_rule": "the visible attribute files lose the instructions of the evaluation goals' products and of as "
                           "many decoy products (others ranked by sha256 of their asin)",
        }
        assets.write_manifest(build_dir, manifest)
    return manifest


def download(task, model_id, snapshot):
    """Fills `snapshot` from Google Drive (the files WebShop's setup.sh fetches) and the model from the hub; returns
    {source: revision}. Needs internet, so no test runs it."""
    data_dir = os.path.join(snapshot, DATA)
    os.makedirs(data_dir, exist_ok=True)
    for name in source_files(webshop.VARIANTS[task]):
        # confirm=t skips Drive's page that asks whether to download a file too large to scan for viruses.
        url = f"https://drive.usercontent.google.com/download?id={DRIVE_IDS[name]}&export=download&confirm=t"
        urllib.request.urlretrieve(url, os.path.join(data_dir, name))  # noqa: S310 (fixed https URLs)
    from huggingface_hub import HfApi, snapshot_download

    revision = HfApi().model_info(model_id).sha
    snapshot_download(model_id, revision=revision, allow_patterns=assets.MODEL_PATTERNS,
                      local_dir=os.path.join(snapshot, "models", model_id))
    return {model_id: revision}


def prepare(home, model_id=None, from_dir=None, task="webshop"):
    """webshop's (or webshop-human's) hflm.assets.prepare: the WebShop roots, the goals and the base model under `home`."""
    model_id = assets.check_model_id(model_id or DEFAULT_MODEL)
    if from_dir is not None and not os.path.isdir(from_dir):
        raise assets.AssetsError(f"--from {from_dir}: no such folder; give a snapshot folder holding {DATA}/ and "
                                 "models/<model id>/")
    snapshot, revisions = from_dir, {}
    if from_dir is None:
        snapshot = os.path.join(home, "hub-snapshot")
        try:
            revisions = download(task, model_id, snapshot)
        except Exception as e:  # network, Drive and hub failures all end here
            raise assets.AssetsError(
                f"downloading WebShop's data or {model_id} failed ({type(e).__name__}: {e}); on a host without "
                "internet, prepare from a snapshot folder instead: --from DIR") from None
    model_source = assets.checked_model_source(snapshot, model_id)
    build(snapshot, home, task, revisions)
    return [os.path.join(home, "assets", task), assets.import_model(model_id, model_source, home, revisions.get(model_id))]


def prepare_human(home, model_id=None, from_dir=None):
    """webshop-human's hflm.assets.prepare."""
    return prepare(home, model_id, from_dir, task="webshop-human")
