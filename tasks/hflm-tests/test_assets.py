"""Tests of hflm.assets on a fixture hub snapshot (tests/fixture_hub.py): the splits, the manifest, refusals.

    .venv-full/bin/python tasks/hflm-tests/test_assets.py
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm
sys.path.insert(0, HERE)

import fixture_hub  # noqa: E402
import fixture_length_control  # noqa: E402
from hflm import assets  # noqa: E402

MODEL = fixture_hub.FIXTURE_MODEL
FIXTURE = None  # written once for the module (the tiny model takes about 2 s)


def setUpModule():
    global FIXTURE
    FIXTURE = fixture_hub.write(tempfile.mkdtemp(prefix="hflm-hub-"))


def tearDownModule():
    shutil.rmtree(FIXTURE, ignore_errors=True)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def tree_bytes(root):
    """Every file under root, relative path -> bytes."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


class Base(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="hflm-home-")
        self.addCleanup(shutil.rmtree, self.home, ignore_errors=True)

    def prepare(self, task, home=None, **kwargs):
        return assets.prepare(task, home or self.home, kwargs.pop("model_id", MODEL), kwargs.pop("from_dir", FIXTURE))

    def split(self, task, name):
        return read_jsonl(os.path.join(self.home, "assets", task, name))

    def halves(self, task):
        return self.split(task, "eval/public.jsonl"), self.split(task, "eval/private.jsonl")

    def assert_halves_follow_the_rule(self, hidden, public, private, id_column):
        ranked = sorted(range(len(hidden)), key=lambda i: (hashlib.sha256(hidden[i][id_column].encode()).hexdigest(), i))
        self.assertEqual(public, [hidden[i] for i in sorted(ranked[0::2])])
        self.assertEqual(private, [hidden[i] for i in sorted(ranked[1::2])])


class Splits(Base):
    def test_gsm8k_train_is_visible_and_test_is_hidden_split_into_halves(self):
        self.prepare("gsm8k")
        self.assertEqual(self.split("gsm8k", "data/train.jsonl"), fixture_hub.gsm8k_rows("train", fixture_hub.COUNTS["gsm8k_train"]))
        public, private = self.halves("gsm8k")
        test = fixture_hub.gsm8k_rows("test", fixture_hub.COUNTS["gsm8k_test"])
        self.assertEqual((len(public), len(private)), (4, 3))
        self.assert_halves_follow_the_rule(test, public, private, "question")

    def test_humaneval_first_82_visible_last_82_hidden(self):
        self.prepare("humaneval")
        rows = fixture_hub.humaneval_rows(164)
        self.assertEqual(self.split("humaneval", "data/train.jsonl"), rows[:82])
        public, private = self.halves("humaneval")
        self.assertEqual((len(public), len(private)), (41, 41))
        self.assert_halves_follow_the_rule(rows[82:], public, private, "task_id")
        self.assertEqual(list(public[0]), ["task_id", "prompt", "canonical_solution", "test", "entry_point"])

    def test_alpacaeval_first_2000_alpaca_rows_visible_and_the_baseline_outputs_hidden(self):
        self.prepare("alpacaeval")
        visible = self.split("alpacaeval", "data/train.jsonl")
        self.assertEqual(len(visible), 2000)
        # Exactly the three columns the reference reads; the source's extra `text` column is dropped.
        self.assertEqual(visible, [{k: r[k] for k in ("instruction", "input", "output")} for r in fixture_hub.alpaca_rows(2000)])
        public, private = self.halves("alpacaeval")
        baseline = fixture_hub.alpaca_eval_rows(fixture_hub.COUNTS["alpaca_eval"])
        # Each instruction carries its difficulty from df_gamed.csv, by its position in the source.
        hidden = [{**{k: r[k] for k in ("instruction", "output", "generator", "dataset")},
                   "instruction_difficulty": fixture_length_control.difficulty(i)} for i, r in enumerate(baseline)]
        self.assert_halves_follow_the_rule(hidden, public, private, "instruction")
        self.assertEqual(len(public) + len(private), len(baseline))
        gamed = self.split("alpacaeval", "eval/gamed_baselines.jsonl")
        self.assertEqual(gamed, [{k: r[k] for k in ("preference", "std_delta_len", "instruction_difficulty")}
                                 for r in fixture_length_control.rows(len(baseline))])
        with open(os.path.join(self.home, "assets", "alpacaeval", "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["files"]["eval/gamed_baselines.jsonl"]["rows"], 2 * len(baseline))
        self.assertEqual(list(manifest["sources"][1]["files"]), ["alpaca_eval_gpt4_baseline.json", "df_gamed.csv"])

    def test_two_builds_are_byte_identical(self):
        other = tempfile.mkdtemp(prefix="hflm-home-")
        self.addCleanup(shutil.rmtree, other, ignore_errors=True)
        self.prepare("humaneval")
        self.prepare("humaneval", home=other)
        self.assertEqual(tree_bytes(self.home), tree_bytes(other))
        self.prepare("humaneval")  # a rebuild in place, too
        self.assertEqual(tree_bytes(self.home), tree_bytes(other))

    def test_the_manifest_lists_each_file_its_sources_and_the_builder(self):
        self.prepare("gsm8k")
        with open(os.path.join(self.home, "assets", "gsm8k", "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["builder_version"], assets.BUILDER_VERSION)
        self.assertEqual(sorted(manifest["files"]), ["data/train.jsonl", "eval/private.jsonl", "eval/public.jsonl"])
        self.assertEqual(manifest["files"]["data/train.jsonl"]["rows"], 5)
        self.assertEqual([(s["repo_id"], s["config"], s["split"], list(s["files"])) for s in manifest["sources"]], [
            ("openai/gsm8k", "main", "train", ["main/train-00000-of-00001.parquet"]),
            ("openai/gsm8k", "main", "test", ["main/test-00000-of-00001.parquet"]),
        ])
        self.assertIsNone(manifest["sources"][0]["revision"])  # imported, not downloaded: no commit known

    def test_the_model_is_copied_with_its_own_manifest(self):
        written = self.prepare("gsm8k")
        model_dir = os.path.join(self.home, "models", "a2rl-fixture--tiny-qwen2")
        self.assertEqual(written, [os.path.join(self.home, "assets", "gsm8k"), model_dir])
        with open(os.path.join(model_dir, "manifest.json")) as f:
            self.assertIn("model.safetensors", json.load(f)["files"])


class Verify(Base):
    def test_a_fresh_build_verifies(self):
        self.prepare("gsm8k")
        self.assertEqual(assets.verify("gsm8k", self.home, MODEL), [])

    def test_a_changed_file_is_named(self):
        self.prepare("gsm8k")
        with open(os.path.join(self.home, "assets", "gsm8k", "eval", "public.jsonl"), "a") as f:
            f.write("{}\n")
        self.assertEqual(assets.verify("gsm8k", self.home), [f"{self.home}/assets/gsm8k/eval/public.jsonl has changed (its sha256 is not the manifest's)"])

    def test_a_missing_file_and_missing_assets_are_named(self):
        self.assertEqual(assets.verify("gsm8k", self.home), [f"{self.home}/assets/gsm8k/manifest.json is missing"])
        self.prepare("gsm8k")
        os.remove(os.path.join(self.home, "models", "a2rl-fixture--tiny-qwen2", "model.safetensors"))
        self.assertEqual(assets.verify("gsm8k", self.home, MODEL), [f"{self.home}/models/a2rl-fixture--tiny-qwen2/model.safetensors is missing"])

    def test_a_manifest_of_another_shape_is_named(self):
        self.prepare("gsm8k")
        with open(os.path.join(self.home, "assets", "gsm8k", "manifest.json"), "w") as f:
            f.write("[]")
        self.assertEqual(assets.verify("gsm8k", self.home), [f"{self.home}/assets/gsm8k/manifest.json is not a manifest that a2rl prepare wrote"])

    def test_assets_of_another_builder_are_named(self):
        self.prepare("gsm8k")
        manifest_path = os.path.join(self.home, "assets", "gsm8k", "manifest.json")
        with open(manifest_path) as f:
            manifest = json.load(f)
        manifest["builder_version"] = 0
        with open(manifest_path, "w") as f:
            json.dump(manifest, f)
        self.assertEqual(assets.verify("gsm8k", self.home), [f"{manifest_path} was written by builder version 0, this is {assets.BUILDER_VERSION}"])

    def test_the_command_line_exits_1_naming_the_problem(self):
        self.assertEqual(assets.main(["verify", "gsm8k", "--home", self.home]), 1)


class Refusals(Base):
    def assert_refused_changing_nothing(self, pattern, task="gsm8k", **kwargs):
        self.prepare("gsm8k")
        before = tree_bytes(self.home)
        with self.assertRaisesRegex(assets.AssetsError, pattern):
            self.prepare(task, **kwargs)
        self.assertEqual(tree_bytes(self.home), before)

    def broken_snapshot(self):
        copy = os.path.join(tempfile.mkdtemp(prefix="hflm-hub-"), "hub")
        self.addCleanup(shutil.rmtree, os.path.dirname(copy), ignore_errors=True)
        shutil.copytree(FIXTURE, copy)
        return copy

    def test_an_unknown_task(self):
        self.assert_refused_changing_nothing(r"no full-tier task 'gsm9k': prepare one of gsm8k, humaneval, alpacaeval", task="gsm9k")

    def test_a_bad_model_id(self):
        self.assert_refused_changing_nothing(r"not a Hugging Face model id: give it as <org>/<name>", model_id="../etc")

    def test_a_missing_from_folder(self):
        self.assert_refused_changing_nothing(r"--from /nonexistent: no such folder", from_dir="/nonexistent")

    def test_a_snapshot_without_the_split_files(self):
        snapshot = self.broken_snapshot()
        shutil.rmtree(os.path.join(snapshot, "datasets", "openai", "gsm8k", "main"))
        self.assert_refused_changing_nothing(r"has no main/train-\*\.parquet: the snapshot must hold the dataset repo's own files", from_dir=snapshot)

    def test_alpacaeval_without_df_gamed_or_with_one_of_fewer_instructions(self):
        snapshot = self.broken_snapshot()
        gamed = os.path.join(snapshot, fixture_length_control.PATH)
        os.remove(gamed)
        self.assert_refused_changing_nothing(r"df_gamed\.csv is missing: the length-controlled win rate needs alpaca_eval's df_gamed\.csv "
                                             r"\(hf download tatsu-lab/alpaca_eval df_gamed\.csv", task="alpacaeval", from_dir=snapshot)
        fixture_length_control.write(snapshot, fixture_hub.COUNTS["alpaca_eval"] - 1)
        self.assert_refused_changing_nothing(r"gives no instruction difficulty for row 8 of the 9 evaluation rows", task="alpacaeval",
                                             from_dir=snapshot)
        with open(gamed, "w") as f:
            f.write("model,index,preference\ngamed,0,0.5\n")
        self.assert_refused_changing_nothing(r"lacks the column\(s\) std_delta_len, instruction_difficulty", task="alpacaeval",
                                             from_dir=snapshot)

    def test_a_file_of_the_wrong_schema(self):
        snapshot = self.broken_snapshot()
        target = os.path.join(snapshot, "datasets", "openai", "gsm8k", "main", "test-00000-of-00001.parquet")
        fixture_hub.write_parquet(target, [{"question": "q", "solution": "s"}])
        self.assert_refused_changing_nothing(r"row 0 lacks the text column\(s\) answer of openai/gsm8k", from_dir=snapshot)

    def test_a_source_too_short_for_its_cut(self):
        snapshot = self.broken_snapshot()
        target = os.path.join(snapshot, "datasets", "openai", "openai_humaneval", "openai_humaneval", "test-00000-of-00001.parquet")
        fixture_hub.write_parquet(target, fixture_hub.humaneval_rows(82))
        self.assert_refused_changing_nothing(r"leave an empty split \(82 visible, 0 hidden rows\)", task="humaneval", from_dir=snapshot)

    def test_a_damaged_parquet_file(self):
        snapshot = self.broken_snapshot()
        with open(os.path.join(snapshot, "datasets", "openai", "gsm8k", "main", "test-00000-of-00001.parquet"), "wb") as f:
            f.write(b"not parquet")
        self.assert_refused_changing_nothing(r"is not a readable parquet file", from_dir=snapshot)

    def test_a_snapshot_without_the_model(self):
        self.assert_refused_changing_nothing(r"models/Qwen/Qwen2.5-1.5B-Instruct does not exist: the snapshot must hold the model repo's files",
                                             model_id="Qwen/Qwen2.5-1.5B-Instruct")

    def test_pickled_weights(self):
        snapshot = self.broken_snapshot()
        open(os.path.join(snapshot, "models", MODEL, "pytorch_model.bin"), "wb").close()
        self.assert_refused_changing_nothing(r"pickled weights \(pytorch_model.bin\)", from_dir=snapshot)

    def test_a_model_that_needs_remote_code(self):
        snapshot = self.broken_snapshot()
        config_path = os.path.join(snapshot, "models", MODEL, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.Model"}
        with open(config_path, "w") as f:
            json.dump(config, f)
        self.assert_refused_changing_nothing(r"trust_remote_code is never enabled", from_dir=snapshot)


if __name__ == "__main__":
    unittest.main()
