"""The full tier's assets: each task's splits and its base model, built under $A2RL_HOME with a sha256 manifest.

    PYTHONPATH=tasks .venv-full/bin/python -m hflm.assets prepare gsm8k --home ~/.a2rl [--model ID] [--from DIR]
    PYTHONPATH=tasks .venv-full/bin/python -m hflm.assets verify gsm8k --home ~/.a2rl [--model ID]

What `prepare` writes (`a2rl prepare` runs it):
    <home>/assets/<task>/data/train.jsonl      visible: what the agent's workspace gets
    <home>/assets/<task>/eval/public.jsonl     hidden: the public (feedback) half of the evaluation set
    <home>/assets/<task>/eval/private.jsonl    hidden: the private (final) half
    <home>/assets/<task>/eval/gamed_baselines.jsonl   alpacaeval only: the length-controlled win rate's
                                               regularisation rows (see "Length control" below)
    <home>/assets/<task>/manifest.json         sha256 and bytes of each file above, the sources, the builder version
    <home>/models/<org>--<name>/               the base model (safetensors only) and its own manifest.json

The sources are read from a snapshot folder, the dataset and model repos' own files:
    <snapshot>/datasets/<repo id>/<the repo's files>   e.g. datasets/openai/gsm8k/main/train-00000-of-00001.parquet
    <snapshot>/models/<model id>/<the repo's files>    e.g. models/Qwen/Qwen2.5-1.5B-Instruct/config.json
With hub access, `prepare` fills <home>/hub-snapshot/ in that layout with huggingface_hub.snapshot_download
(only the files each source names) and builds from it; without, `--from DIR` builds from a folder in that
layout made elsewhere (for example by copying a hub host's <home>/hub-snapshot/). Both paths share every
step after the download, so the tests, which cannot reach a hub, run all of them on fixture data.

Evaluation halves: the hidden rows are ranked by sha256 of their id (`Source.id_column`: gsm8k's question,
humaneval's task_id, alpaca_eval's instruction; ties by source position); even ranks are public, odd ranks
private, each half kept in source order. The rule needs no list of indices and does not depend on row order.

Length control (alpacaeval): AlpacaEval 2.0's length-controlled win rate (alpaca_eval 0.6.6,
`length_controlled_v1`) needs each instruction's difficulty and the annotations of two length-gamed
baselines, both from alpaca_eval's `df_gamed.csv`, a file of the same dataset repo
(<snapshot>/datasets/tatsu-lab/alpaca_eval/df_gamed.csv). It is read as alpaca_eval reads it
(pandas.read_csv; the difficulty of the row at source position i is drop_duplicates("index")'s row i),
each hidden row gets its `instruction_difficulty`, and every row of the file goes to
eval/gamed_baselines.jsonl as {"preference", "std_delta_len", "instruction_difficulty"}, which the
server's judge kind fits the GLM with.

Every check runs before anything is written, and the task folder is replaced by a rename, so a refused
prepare leaves an earlier build as it was.
"""

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass

from hflm.folders import built_aside
from hflm.model_dir import ModelFolderError, check_model_dir

# Raise when the splits, the files' format or the manifest change: a manifest names the builder that wrote it.
# 2: alpacaeval's hidden rows carry instruction_difficulty, and eval/gamed_baselines.jsonl is written.
BUILDER_VERSION = 2
HUMANEVAL_VISIBLE = 82  # the reference's cut: [:82] visible, [82:] hidden
ALPACA_VISIBLE = 2000  # the reference's alpaca train[:2000]
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# Model files a snapshot takes: weights as safetensors, config and tokenizer; pickles never (see model_dir).
MODEL_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja"]


class AssetsError(ValueError):
    """A request that cannot be prepared or verified; the message says what to do instead."""


@dataclass(frozen=True)
class Source:
    repo_id: str  # the Hugging Face dataset repo
    config: str  # its dataset config, as the reference loads it
    split: str
    pattern: str  # the repo's files holding the split (glob, relative to the repo)
    columns: tuple  # what each row must have; rows are written with exactly these, in this order
    id_column: str  # what identifies an item (the public/private rule hashes it)


@dataclass(frozen=True)
class TaskAssets:
    visible: Source
    hidden: Source
    default_model: str
    visible_rows: slice  # of the visible source's rows
    hidden_rows: slice  # of the hidden source's rows
    # alpaca_eval's df_gamed.csv, relative to the hidden source's repo, for the length-controlled win rate; or None.
    length_control: str = None


GSM8K_COLUMNS = ("question", "answer")
HUMANEVAL_COLUMNS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
HUMANEVAL = Source("openai/openai_humaneval", "openai_humaneval", "test", "openai_humaneval/test-*.parquet", HUMANEVAL_COLUMNS, "task_id")

# The model the reference harness runs its static tasks with (RD-Agent autorl_bench's README: GSM8K on the base model
# Qwen/Qwen2.5-1.5B, the model its --model example names); ALFWorld, not built here, it runs on the Instruct model.
REFERENCE_MODEL = "Qwen/Qwen2.5-1.5B"

TASKS = {
    "gsm8k": TaskAssets(
        visible=Source("openai/gsm8k", "main", "train", "main/train-*.parquet", GSM8K_COLUMNS, "question"),
        hidden=Source("openai/gsm8k", "main", "test", "main/test-*.parquet", GSM8K_COLUMNS, "question"),
        default_model=REFERENCE_MODEL,
        visible_rows=slice(None),
        hidden_rows=slice(None),
    ),
    "humaneval": TaskAssets(
        visible=HUMANEVAL,
        hidden=HUMANEVAL,
        default_model=REFERENCE_MODEL,
        visible_rows=slice(None, HUMANEVAL_VISIBLE),
        hidden_rows=slice(HUMANEVAL_VISIBLE, None),
    ),
    "alpacaeval": TaskAssets(
        visible=Source("tatsu-lab/alpaca", "default", "train", "data/train-*.parquet", ("instruction", "input", "output"), "instruction"),
        # Its outputs are the reference the judge compares the model's against, as in the reference harness.
        hidden=Source(
            "tatsu-lab/alpaca_eval", "alpaca_eval_gpt4_baseline", "eval", "alpaca_eval_gpt4_baseline.json",
            ("instruction", "output", "generator", "dataset"), "instruction",
        ),
        default_model=REFERENCE_MODEL,
        visible_rows=slice(None, ALPACA_VISIBLE),
        hidden_rows=slice(None),
        length_control="df_gamed.csv",
    ),
}
# Tasks whose sources are game files, not rows: prepared by their own module (its prepare(home, model_id, from_dir),
# or the function named after a colon, where one module prepares several tasks), in the same home layout with the
# same manifests.
GAME_TASKS = {"alfworld": "hflm.alfworld_assets", "deepsearchqa": "hflm.deepsearchqa_assets", "webshop": "hflm.webshop_assets",
              "webshop-human": "hflm.webshop_assets:prepare_human"}
LENGTH_CONTROL_COLUMNS = ("index", "preference", "std_delta_len", "instruction_difficulty")
GAMED_BASELINES = "eval/gamed_baselines.jsonl"


def task_assets(task):
    if task not in TASKS:
        raise AssetsError(f"no full-tier task {task!r}: prepare one of {', '.join([*TASKS, *GAME_TASKS])}")
    return TASKS[task]


def check_model_id(model_id):
    if not MODEL_ID.match(model_id) or ".." in model_id:
        raise AssetsError(f"{model_id!r} is not a Hugging Face model id: give it as <org>/<name>, e.g. Qwen/Qwen2.5-1.5B-Instruct")
    return model_id


def model_folder(home, model_id):
    return os.path.join(home, "models", check_model_id(model_id).replace("/", "--"))


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_entry(path):
    return {"sha256": sha256_file(path), "bytes": os.path.getsize(path)}


# --- reading a snapshot ---------------------------------------------------------------------------


def source_files(snapshot, source):
    repo_dir = os.path.join(snapshot, "datasets", source.repo_id)
    files = sorted(glob.glob(os.path.join(repo_dir, source.pattern)))
    if not files:
        raise AssetsError(
            f"{repo_dir} has no {source.pattern}: the snapshot must hold the dataset repo's own files "
            f"(hf download {source.repo_id} --repo-type dataset --local-dir {repo_dir})"
        )
    return files


def read_rows(path):
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except Exception as e:  # pyarrow raises several types for a damaged file
            raise AssetsError(f"{path} is not a readable parquet file ({e}): download it again") from None
    try:
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
    except ValueError as e:
        raise AssetsError(f"{path} is not valid JSON ({e}): download it again") from None
    if not isinstance(rows, list):
        raise AssetsError(f"{path} holds no list of rows: download it again")
    return rows


def load_source(snapshot, source):
    """The source's rows in repo order (files in name order, as the hub's shards are numbered), checked against its columns."""
    files = source_files(snapshot, source)
    rows = []
    for path in files:
        for i, row in enumerate(read_rows(path)):
            missing = [c for c in source.columns if not isinstance(row, dict) or not isinstance(row.get(c), str)]
            if missing:
                raise AssetsError(
                    f"{path}: row {i} lacks the text column(s) {', '.join(missing)} of {source.repo_id}; "
                    f"each row needs {', '.join(source.columns)}: is this the right repo's file?"
                )
            rows.append({c: row[c] for c in source.columns})
    repo_dir = os.path.join(snapshot, "datasets", source.repo_id)
    return rows, {os.path.relpath(p, repo_dir): file_entry(p) for p in files}


def load_length_control(snapshot, source, name, n_rows):
    """alpaca_eval's df_gamed.csv as alpaca_eval 0.6.6 reads it: (the difficulty of each of the hidden source's
    n_rows rows, by position; the gamed baselines' rows for the GLM; the file's manifest entry)."""
    import math

    import pandas as pd

    repo_dir = os.path.join(snapshot, "datasets", source.repo_id)
    path = os.path.join(repo_dir, name)
    if not os.path.isfile(path):
        raise AssetsError(
            f"{path} is missing: the length-controlled win rate needs alpaca_eval's {name} "
            f"(hf download {source.repo_id} {name} --repo-type dataset --local-dir {repo_dir})"
        )
    try:
        # pandas' parser, as alpaca_eval's: its floats can differ from Python's in the last bit, which the fit can feel.
        df = pd.read_csv(path)
        missing = [c for c in LENGTH_CONTROL_COLUMNS if c not in df.columns]
        values = df[[c for c in LENGTH_CONTROL_COLUMNS if c in df.columns]].astype(float)
    except (ValueError, pd.errors.ParserError) as e:
        raise AssetsError(f"{path} is not alpaca_eval's {name} ({e}): download it again") from None
    bad = [i for i, row in enumerate(values.itertuples(index=False)) if not all(math.isfinite(v) for v in row)]
    if missing or bad or len(df) == 0 or not values["preference"].between(0, 1).all():
        problem = (f"lacks the column(s) {', '.join(missing)}" if missing else f"row {bad[0]} has a value that is no finite number"
                   if bad else "has no rows" if len(df) == 0 else "has a preference outside [0, 1]")
        raise AssetsError(f"{path} {problem}; alpaca_eval's {name} has {', '.join(LENGTH_CONTROL_COLUMNS)}: download it again")
    # alpaca_eval: df.drop_duplicates("index")["instruction_difficulty"][position], a lookup by the kept rows' labels.
    difficulty = df.drop_duplicates("index")["instruction_difficulty"]
    absent = [i for i in range(n_rows) if i not in difficulty.index]
    if absent:
        raise AssetsError(f"{path} gives no instruction difficulty for row {absent[0]} of the {n_rows} evaluation rows "
                          f"(alpaca_eval would fail on it too): is it the file of the same {source.repo_id} revision?")
    gamed = [{"preference": float(r.preference), "std_delta_len": float(r.std_delta_len),
              "instruction_difficulty": float(r.instruction_difficulty)} for r in values.itertuples(index=False)]
    return [float(difficulty[i]) for i in range(n_rows)], gamed, {name: file_entry(path)}


def split_public_private(rows, id_column):
    ranked = sorted(range(len(rows)), key=lambda i: (hashlib.sha256(rows[i][id_column].encode("utf-8")).hexdigest(), i))
    public = {i for rank, i in enumerate(ranked) if rank % 2 == 0}
    return [r for i, r in enumerate(rows) if i in public], [r for i, r in enumerate(rows) if i not in public]


def write_jsonl(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_manifest(folder, manifest):
    with open(os.path.join(folder, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")


# --- building -------------------------------------------------------------------------------------


def build_splits(task, snapshot, home, revisions=None):
    """Builds <home>/assets/<task>/ from a snapshot folder; returns the manifest. `revisions`: repo id -> commit, when downloaded."""
    spec = task_assets(task)
    visible, visible_files = load_source(snapshot, spec.visible)
    hidden, hidden_files = (visible, visible_files) if spec.hidden == spec.visible else load_source(snapshot, spec.hidden)
    extra_outputs = {}
    if spec.length_control:
        # Before the cut: difficulties follow the source's positions, as alpaca_eval's records do.
        difficulties, gamed, found = load_length_control(snapshot, spec.hidden, spec.length_control, len(hidden))
        hidden = [{**row, "instruction_difficulty": d} for row, d in zip(hidden, difficulties)]
        hidden_files = {**hidden_files, **found}
        extra_outputs[GAMED_BASELINES] = gamed
    visible, hidden = visible[spec.visible_rows], hidden[spec.hidden_rows]
    if not visible or not hidden:
        raise AssetsError(f"{snapshot}: {task}'s sources leave an empty split ({len(visible)} visible, "
                          f"{len(hidden)} hidden rows): the snapshot is incomplete; download the repos' files again")
    public, private = split_public_private(hidden, spec.hidden.id_column)

    with built_aside(os.path.join(home, "assets", task)) as build_dir:
        outputs = {"data/train.jsonl": visible, "eval/public.jsonl": public, "eval/private.jsonl": private, **extra_outputs}
        files = {}
        for name, rows in outputs.items():
            write_jsonl(os.path.join(build_dir, name), rows)
            files[name] = {**file_entry(os.path.join(build_dir, name)), "rows": len(rows)}
        sources = [
            {"role": role, "repo_id": s.repo_id, "config": s.config, "split": s.split,
             "revision": (revisions or {}).get(s.repo_id), "files": found}
            for role, s, found in (("visible", spec.visible, visible_files), ("hidden", spec.hidden, hidden_files))
        ]
        manifest = {
            "task": task, "builder_version": BUILDER_VERSION, "files": files, "sources": sources,
            "public_private_rule": f"hidden rows ranked by sha256 of {spec.hidden.id_column} (ties by position): "
                                   "even ranks public, odd private",
        }
        write_manifest(build_dir, manifest)
    return manifest


def checked_model_source(snapshot, model_id):
    """<snapshot>/models/<model_id>, once it is a loadable model folder: safetensors, no pickles, no remote code."""
    source = os.path.join(snapshot, "models", model_id)
    if not os.path.isdir(source):
        raise AssetsError(f"{source} does not exist: the snapshot must hold the model repo's files "
                          f"(hf download {model_id} --local-dir {source})")
    try:
        check_model_dir(source)
    except ModelFolderError as e:
        raise AssetsError(f"model {model_id}: {e}") from None
    return source


def import_model(model_id, source, home, revision=None):
    """Copies a checked model folder into <home>/models/<org>--<name>/ with a manifest; returns that folder."""
    dest = model_folder(home, model_id)
    with built_aside(dest) as build_dir:
        files = {}
        for name in sorted(os.listdir(source)):
            path = os.path.join(source, name)
            if os.path.isfile(path) and not name.startswith(".") and name != "manifest.json":
                shutil.copyfile(path, os.path.join(build_dir, name))
                files[name] = file_entry(os.path.join(build_dir, name))
        manifest = {"model": model_id, "revision": revision, "builder_version": BUILDER_VERSION, "files": files}
        write_manifest(build_dir, manifest)
    return dest


def download(task, model_id, snapshot):
    """Fills `snapshot` (the --from layout) from the hub; returns repo id -> commit. Needs hub access, so no test runs it."""
    from huggingface_hub import HfApi, snapshot_download

    api, revisions = HfApi(), {}
    spec = task_assets(task)
    patterns = {}
    for source in (spec.visible, spec.hidden):
        patterns.setdefault(source.repo_id, set()).add(source.pattern)
    if spec.length_control:
        patterns[spec.hidden.repo_id].add(spec.length_control)
    for repo_id, repo_patterns in patterns.items():
        revisions[repo_id] = api.dataset_info(repo_id).sha  # pinned, so the files all come from one commit
        snapshot_download(repo_id, repo_type="dataset", revision=revisions[repo_id], allow_patterns=sorted(repo_patterns),
                          local_dir=os.path.join(snapshot, "datasets", repo_id))
    revisions[model_id] = api.model_info(model_id).sha
    snapshot_download(model_id, revision=revisions[model_id], allow_patterns=MODEL_PATTERNS,
                      local_dir=os.path.join(snapshot, "models", model_id))
    return revisions


def prepare(task, home, model_id=None, from_dir=None):
    """Builds a task's splits and its base model under `home`; returns what was written (paths)."""
    if task in GAME_TASKS:
        import importlib

        module, _, function = GAME_TASKS[task].partition(":")
        return getattr(importlib.import_module(module), function or "prepare")(home, model_id, from_dir)
    spec = task_assets(task)
    model_id = check_model_id(model_id or spec.default_model)
    if from_dir is not None and not os.path.isdir(from_dir):
        raise AssetsError(f"--from {from_dir}: no such folder; give a snapshot folder holding datasets/<repo id>/ "
                          "and models/<model id>/")
    snapshot, revisions = from_dir, {}
    if from_dir is None:
        snapshot = os.path.join(home, "hub-snapshot")
        try:
            revisions = download(task, model_id, snapshot)
        except Exception as e:  # the hub's many failure types (no network, unknown repo, gated model) all end here
            raise AssetsError(
                f"downloading {task}'s sources or {model_id} from the Hugging Face hub failed ({type(e).__name__}: {e}); "
                "on a host without hub access, prepare from a snapshot folder instead: --from DIR"
            ) from None
    model_source = checked_model_source(snapshot, model_id)  # first: a refused model leaves the task's assets untouched too
    build_splits(task, snapshot, home, revisions)
    model_dir = import_model(model_id, model_source, home, revisions.get(model_id))
    return [os.path.join(home, "assets", task), model_dir]


# --- verifying ------------------------------------------------------------------------------------


def verify_folder(folder):
    """Problems with a folder written with a manifest.json: [] when every listed file is there, unchanged."""
    manifest_path = os.path.join(folder, "manifest.json")
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return [f"{manifest_path} is missing"]
    except ValueError:
        return [f"{manifest_path} is not valid JSON"]
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return [f"{manifest_path} is not a manifest that a2rl prepare wrote"]
    if manifest.get("builder_version") != BUILDER_VERSION:
        return [f"{manifest_path} was written by builder version {manifest.get('builder_version')}, this is {BUILDER_VERSION}"]
    problems = []
    for name, want in manifest["files"].items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            problems.append(f"{path} is missing")
        elif os.path.getsize(path) != want["bytes"] or sha256_file(path) != want["sha256"]:
            problems.append(f"{path} has changed (its sha256 is not the manifest's)")
    return problems


def verify(task, home, model_id=None):
    if task not in GAME_TASKS:
        task_assets(task)
    problems = verify_folder(os.path.join(home, "assets", task))
    if model_id is not None:
        problems += verify_folder(model_folder(home, model_id))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hflm.assets", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["prepare", "verify"])
    parser.add_argument("task")
    parser.add_argument("--home", required=True, help="the a2rl home ($A2RL_HOME)")
    parser.add_argument("--model", help="the base model's Hugging Face id (default: the task's)")
    parser.add_argument("--from", dest="from_dir",
                        help="a snapshot folder (datasets/<repo id>/, models/<model id>/) instead of the hub")
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            from_dir = args.from_dir and os.path.abspath(args.from_dir)
            for path in prepare(args.task, os.path.abspath(args.home), args.model, from_dir):
                with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
                    for name, entry in json.load(f)["files"].items():
                        print(f"{os.path.join(path, name)}\t{entry['bytes']} bytes\tsha256 {entry['sha256']}")
            return 0
        problems = verify(args.task, os.path.abspath(args.home), args.model)
    except AssetsError as e:
        print(f"hflm.assets: {e}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
