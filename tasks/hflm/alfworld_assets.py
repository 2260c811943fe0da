"""alfworld's assets: ALFWorld's game files split into visible train games and hidden valid_unseen halves.

    PYTHONPATH=tasks .venv-full/bin/python -m hflm.assets prepare alfworld --home ~/.a2rl [--model ID] [--from DIR]

hflm.assets hands the task here (GAME_TASKS); the home layout, manifests and model import are its own. Writes:

    <home>/assets/alfworld/data/alfworld/json_2.1.1/train/<game>/{traj_data.json,game.tw-pddl}   visible ($ALFWORLD_DATA)
    <home>/assets/alfworld/data/react_prompts.json     ReAct's alfworld_3prompts.json, the reference's react_prompts.json
    <home>/assets/alfworld/data/train.jsonl            one row per train game: {"gamefile", "name", "task_type"}
    <home>/assets/alfworld/eval/{public,private}/json_2.1.1/valid_unseen/<game>/...   hidden: the 134 valid_unseen games
    <home>/assets/alfworld/eval/{public,private}.jsonl the same rows for each half (gamefile relative to eval/)
    <home>/assets/alfworld/eval/react_prompts.json     the grader's copy
    <home>/assets/alfworld/manifest.json               sha256 and bytes of every file, the sources, the rule

A game is a folder holding traj_data.json and game.tw-pddl that upstream's AlfredTWEnv would play: solvable, of
the six task types, not "movable" or "Sliced" (upstream's rule; only these two files are read, so only these are
copied: json + tw-pddl, no PDDL states or images). Halves: valid_unseen's games ranked by sha256 of their name
("<task folder>/<trial folder>", the reference's name), even ranks public, odd private.

Sources, from DIR (--from) or, with internet, downloaded into <home>/hub-snapshot/ in the same layout:
    DIR/alfworld/json_2.1.1/{train,valid_unseen}/...              what `alfworld-download` unpacks into $ALFWORLD_DATA
                                                                  (json_2.1.1_json.zip and json_2.1.3_tw-pddl.zip)
    DIR/github/ysymyth/ReAct/prompts/alfworld_3prompts.json       ReAct's prompt file
    DIR/models/<model id>/                                        the base model, as for every full task
"""

import hashlib
import io
import json
import os
import shutil
import urllib.request
import zipfile

from hflm import assets
from hflm.folders import built_aside

# The model the reference's README runs ALFWorld with.
DEFAULT_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
DATA = "alfworld"
PROMPTS = "github/ysymyth/ReAct/prompts/alfworld_3prompts.json"
# What alfworld-download fetches for the text games (alfworld's scripts/alfworld-download), and ReAct's prompts.
DOWNLOADS = {
    DATA: ["https://github.com/alfworld/alfworld/releases/download/0.2.2/json_2.1.1_json.zip",
           "https://github.com/alfworld/alfworld/releases/download/0.4.2/json_2.1.3_tw-pddl.zip"],
    PROMPTS: ["https://raw.githubusercontent.com/ysymyth/ReAct/master/prompts/alfworld_3prompts.json"],
}
TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
GAME_FILES = ("traj_data.json", "game.tw-pddl")
PROMPT_KEYS = [f"react_{k}_{n}" for k in ("put", "clean", "heat", "cool", "examine", "puttwo") for n in (0, 1)]


def games(split_dir):
    """{name: folder} of the playable games under a split folder, as upstream's AlfredTWEnv collects them."""
    if not os.path.isdir(split_dir):
        raise assets.AssetsError(f"{split_dir} is missing: the snapshot needs alfworld-download's json_2.1.1 "
                                 "(json and tw-pddl sets); run alfworld-download and copy $ALFWORLD_DATA to DIR/alfworld")
    found = {}
    for root, _dirs, files in os.walk(split_dir):
        if not all(f in files for f in GAME_FILES) or "movable" in root or "Sliced" in root:
            continue
        try:
            with open(os.path.join(root, "traj_data.json"), encoding="utf-8") as f:
                task_type = json.load(f)["task_type"]
            with open(os.path.join(root, "game.tw-pddl"), encoding="utf-8") as f:
                solvable = json.load(f).get("solvable")
        except (ValueError, KeyError, TypeError) as e:
            raise assets.AssetsError(f"{root}: unreadable game files ({e}): download the data again") from None
        if task_type in TASK_TYPES and solvable:
            found["/".join(os.path.relpath(root, split_dir).split(os.sep)[-2:])] = (root, task_type)
    if not found:
        raise assets.AssetsError(f"{split_dir} holds no playable game (traj_data.json + solvable game.tw-pddl)")
    return found


def read_prompts(snapshot):
    path = os.path.join(snapshot, PROMPTS)
    try:
        with open(path, encoding="utf-8") as f:
            prompts = json.load(f)
    except FileNotFoundError:
        raise assets.AssetsError(f"{path} is missing: copy ReAct's prompts/alfworld_3prompts.json there "
                                 "(github.com/ysymyth/ReAct)") from None
    except ValueError as e:
        raise assets.AssetsError(f"{path} is not valid JSON ({e}): download it again") from None
    missing = [k for k in PROMPT_KEYS if not isinstance(prompts.get(k), str)]
    if missing:
        raise assets.AssetsError(f"{path} lacks the example(s) {', '.join(missing)} the reference's prompt takes: "
                                 "is it ReAct's alfworld_3prompts.json?")
    return path


def copy_games(found, names, dest_split_dir, rows_root):
    """Copies the named games' two files under dest_split_dir; returns their rows (gamefile relative to rows_root)."""
    rows = []
    for name in names:
        source, task_type = found[name]
        target = os.path.join(dest_split_dir, *name.split("/"))
        os.makedirs(target, exist_ok=True)
        for f in GAME_FILES:
            shutil.copyfile(os.path.join(source, f), os.path.join(target, f))
        rows.append({"gamefile": os.path.relpath(os.path.join(target, "game.tw-pddl"), rows_root), "name": name,
                     "task_type": task_type})
    return rows


def build(snapshot, home, revisions=None):
    """Builds <home>/assets/alfworld/ from a snapshot folder; returns the manifest."""
    data_root = os.path.join(snapshot, DATA, "json_2.1.1")
    train, unseen = games(os.path.join(data_root, "train")), games(os.path.join(data_root, "valid_unseen"))
    prompts_path = read_prompts(snapshot)
    ranked = sorted(unseen, key=lambda n: (hashlib.sha256(n.encode("utf-8")).hexdigest(), n))
    halves = {"public": sorted(ranked[0::2]), "private": sorted(ranked[1::2])}
    with built_aside(os.path.join(home, "assets", "alfworld")) as build_dir:
        data, evaluation = os.path.join(build_dir, "data"), os.path.join(build_dir, "eval")
        rows = copy_games(train, sorted(train), os.path.join(data, DATA, "json_2.1.1", "train"), data)
        assets.write_jsonl(os.path.join(data, "train.jsonl"), rows)
        for folder in (data, evaluation):
            os.makedirs(folder, exist_ok=True)
            shutil.copyfile(prompts_path, os.path.join(folder, "react_prompts.json"))
        for half, names in halves.items():
            half_rows = copy_games(unseen, names, os.path.join(evaluation, half, "json_2.1.1", "valid_unseen"), evaluation)
            assets.write_jsonl(os.path.join(evaluation, f"{half}.jsonl"), half_rows)
        files = {}
        for root, _dirs, names in os.walk(build_dir):
            for name in sorted(names):
                path = os.path.join(root, name)
                files[os.path.relpath(path, build_dir).replace(os.sep, "/")] = assets.file_entry(path)
        manifest = {
            "task": "alfworld", "builder_version": assets.BUILDER_VERSION, "files": dict(sorted(files.items())),
            "games": {"train": len(train), "public": len(halves["public"]), "private": len(halves["private"])},
            "sources": [{"role": "games", "path": DATA, "urls": DOWNLOADS[DATA], "revision": (revisions or {}).get(DATA)},
                        {"role": "prompts", "path": PROMPTS, "urls": DOWNLOADS[PROMPTS],
                         "sha256": assets.sha256_file(prompts_path)}],
            "public_private_rule": "valid_unseen games ranked by sha256 of their name (<task folder>/<trial folder>): "
                                   "even ranks public, odd private",
        }
        assets.write_manifest(build_dir, manifest)
    return manifest


def download(model_id, snapshot):
    """Fills `snapshot` from GitHub (what alfworld-download fetches for text games, ReAct's prompts) and the model from
    the hub; returns {source: revision}. Needs internet, so no test runs it."""
    for url in DOWNLOADS[DATA]:
        with urllib.request.urlopen(url) as response:  # noqa: S310 (fixed https URLs)
            zipfile.ZipFile(io.BytesIO(response.read())).extractall(os.path.join(snapshot, DATA))
    prompts = os.path.join(snapshot, PROMPTS)
    os.makedirs(os.path.dirname(prompts), exist_ok=True)
    urllib.request.urlretrieve(DOWNLOADS[PROMPTS][0], prompts)  # noqa: S310
    from huggingface_hub import HfApi, snapshot_download

    revision = HfApi().model_info(model_id).sha
    snapshot_download(model_id, revision=revision, allow_patterns=assets.MODEL_PATTERNS,
                      local_dir=os.path.join(snapshot, "models", model_id))
    return {DATA: os.path.basename(DOWNLOADS[DATA][-1]), model_id: revision}


def prepare(home, model_id=None, from_dir=None):
    """alfworld's hflm.assets.prepare: the games, the prompts and the base model under `home`; returns the folders."""
    model_id = assets.check_model_id(model_id or DEFAULT_MODEL)
    if from_dir is not None and not os.path.isdir(from_dir):
        raise assets.AssetsError(f"--from {from_dir}: no such folder; give a snapshot folder holding {DATA}/, "
                                 f"{PROMPTS} and models/<model id>/")
    snapshot, revisions = from_dir, {}
    if from_dir is None:
        snapshot = os.path.join(home, "hub-snapshot")
        try:
            revisions = download(model_id, snapshot)
        except Exception as e:  # network, GitHub and hub failures all end here
            raise assets.AssetsError(
                f"downloading ALFWorld's games, ReAct's prompts or {model_id} failed ({type(e).__name__}: {e}); on a host "
                "without internet, prepare from a snapshot folder instead: --from DIR") from None
    model_source = assets.checked_model_source(snapshot, model_id)
    build(snapshot, home, revisions)
    return [os.path.join(home, "assets", "alfworld"), assets.import_model(model_id, model_source, home, revisions.get(model_id))]
