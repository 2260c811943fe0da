"""deepsearchqa's assets: google/deepsearchqa's 900 questions, shuffled and cut as the reference cuts them.

    PYTHONPATH=tasks .venv-full/bin/python -m hflm.assets prepare deepsearchqa --home ~/.a2rl [--model ID] [--from DIR]

hflm.assets hands the task here (GAME_TASKS: its sources need a shuffle, which the row tasks' slices do not do); the
home layout, manifests and model import are its own. Writes:

    <home>/assets/deepsearchqa/data/train.jsonl          visible: the 100 train questions
    <home>/assets/deepsearchqa/eval/{public,private}.jsonl hidden: the 200 evaluation questions, halved
    <home>/assets/deepsearchqa/manifest.json             sha256 and bytes of every file, the source, the rules

The reference's split (RD-Agent autorl_bench benchmarks/deepsearchqa/data.py): the dataset's one split ("eval",
DSQA-full.csv) shuffled as datasets' Dataset.shuffle(seed=42) shuffles (numpy's default_rng(42).permutation), its
first 100 the train questions, the next 200 the evaluation questions, the remaining 600 unused. Halves: the 200
ranked by sha256 of the question, even ranks public, odd private. A row is {"id": "dsqa-<row in the csv>",
"question" (upstream's `problem`, named as the other full tasks name theirs), "answer", "answer_type",
"problem_category"}.

Sources, from DIR (--from) or, with hub access, downloaded into <home>/hub-snapshot/ in the same layout:
    DIR/datasets/google/deepsearchqa/DSQA-full.csv      the dataset repo's own file
    DIR/models/<model id>/                             the base model, as for every full task
"""

import os

from hflm import assets
from hflm.folders import built_aside

# The reference names no model of its own for DeepSearchQA; its README runs the interactive tasks on this one
# (ALFWorld's), the instruction-following size a ReAct prompt needs.
DEFAULT_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
REPO_ID = "google/deepsearchqa"
SOURCE_FILE = "DSQA-full.csv"
COLUMNS = ("problem", "problem_category", "answer", "answer_type")
SPLIT_SEED, TRAIN_SIZE, EVAL_SIZE = 42, 100, 200
ANSWER_TYPES = ("Single Answer", "Set Answer")


def read_source(snapshot):
    """The csv's rows in file order, as datasets' csv builder reads them (pandas), each checked."""
    import pandas as pd

    repo_dir = os.path.join(snapshot, "datasets", REPO_ID)
    path = os.path.join(repo_dir, SOURCE_FILE)
    if not os.path.isfile(path):
        raise assets.AssetsError(f"{path} is missing: the snapshot must hold the dataset repo's own file "
                                 f"(hf download {REPO_ID} {SOURCE_FILE} --repo-type dataset --local-dir {repo_dir})")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as e:
        raise assets.AssetsError(f"{path} is not a readable csv ({e}): download it again") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise assets.AssetsError(f"{path} lacks the column(s) {', '.join(missing)} of {REPO_ID}: is it its {SOURCE_FILE}?")
    rows = []
    for i, row in enumerate(frame[list(COLUMNS)].to_dict("records")):
        if not row["problem"].strip() or not row["answer"].strip() or row["answer_type"] not in ANSWER_TYPES:
            raise assets.AssetsError(f"{path}: row {i} has an empty problem or answer, or an answer_type other than "
                                     f"{' or '.join(ANSWER_TYPES)}: download it again")
        rows.append({"id": f"dsqa-{i}", "question": row["problem"], "answer": row["answer"],
                     "answer_type": row["answer_type"], "problem_category": row["problem_category"]})
    if len(rows) <= TRAIN_SIZE:
        raise assets.AssetsError(f"{path} has {len(rows)} rows, none left for evaluation after the {TRAIN_SIZE} train "
                                 "questions: the snapshot is incomplete; download it again")
    return rows, path


def split(rows):
    """(train, eval): the reference's cut of the rows shuffled with seed 42 (datasets' shuffle: default_rng)."""
    import numpy as np

    order = np.random.default_rng(SPLIT_SEED).permutation(len(rows)).tolist()
    return [rows[i] for i in order[:TRAIN_SIZE]], [rows[i] for i in order[TRAIN_SIZE:TRAIN_SIZE + EVAL_SIZE]]


def build(snapshot, home, revisions=None):
    """Builds <home>/assets/deepsearchqa/ from a snapshot folder; returns the manifest."""
    rows, path = read_source(snapshot)
    train, evaluation = split(rows)
    public, private = assets.split_public_private(evaluation, "question")
    with built_aside(os.path.join(home, "assets", "deepsearchqa")) as build_dir:
        outputs = {"data/train.jsonl": train, "eval/public.jsonl": public, "eval/private.jsonl": private}
        files = {}
        for name, written in outputs.items():
            assets.write_jsonl(os.path.join(build_dir, name), written)
            files[name] = {**assets.file_entry(os.path.join(build_dir, name)), "rows": len(written)}
        manifest = {
            "task": "deepsearchqa", "builder_version": assets.BUILDER_VERSION, "files": files,
            "sources": [{"role": "questions", "repo_id": REPO_ID, "config": "deepsearchqa", "split": "eval",
                         "revision": (revisions or {}).get(REPO_ID), "files": {SOURCE_FILE: assets.file_entry(path)}}],
            "split_rule": f"rows shuffled with numpy default_rng({SPLIT_SEED}).permutation (datasets' shuffle(seed={SPLIT_SEED})): "
                          f"the first {TRAIN_SIZE} train, the next {EVAL_SIZE} evaluation, the rest unused",
            "public_private_rule": "evaluation rows ranked by sha256 of question (ties by position): even ranks public, odd private",
        }
        assets.write_manifest(build_dir, manifest)
    return manifest


def download(model_id, snapshot):
    """Fills `snapshot` from the hub (the dataset's csv, the model); returns {repo: revision}. Needs hub access, so
    no test runs it."""
    from huggingface_hub import HfApi, snapshot_download

    api = HfApi()
    revisions = {REPO_ID: api.dataset_info(REPO_ID).sha, model_id: api.model_info(model_id).sha}
    snapshot_download(REPO_ID, repo_type="dataset", revision=revisions[REPO_ID], allow_patterns=[SOURCE_FILE],
                      local_dir=os.path.join(snapshot, "datasets", REPO_ID))
    snapshot_download(model_id, revision=revisions[model_id], allow_patterns=assets.MODEL_PATTERNS,
                      local_dir=os.path.join(snapshot, "models", model_id))
    return revisions


def prepare(home, model_id=None, from_dir=None):
    """deepsearchqa's hflm.assets.prepare: the questions and the base model under `home`; returns the folders."""
    model_id = assets.check_model_id(model_id or DEFAULT_MODEL)
    if from_dir is not None and not os.path.isdir(from_dir):
        raise assets.AssetsError(f"--from {from_dir}: no such folder; give a snapshot folder holding "
                                 f"datasets/{REPO_ID}/{SOURCE_FILE} and models/<model id>/")
    snapshot, revisions = from_dir, {}
    if from_dir is None:
        snapshot = os.path.join(home, "hub-snapshot")
        try:
            revisions = download(model_id, snapshot)
        except Exception as e:  # the hub's many failure types all end here
            raise assets.AssetsError(
                f"downloading {REPO_ID} or {model_id} from the Hugging Face hub failed ({type(e).__name__}: {e}); on a "
                "host without hub access, prepare from a snapshot folder instead: --from DIR") from None
    model_source = assets.checked_model_source(snapshot, model_id)  # first: a refused model leaves the assets untouched
    build(snapshot, home, revisions)
    return [os.path.join(home, "assets", "deepsearchqa"), assets.import_model(model_id, model_source, home, revisions.get(model_id))]
