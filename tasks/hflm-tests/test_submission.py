"""hflm.submission on a tiny Qwen2 base built here: full models and LoRA adapters accepted and materialised,
every refusal with its code, writing nothing, and the tokenizer_config.json repair.

    .venv-full/bin/python tasks/hflm-tests/test_submission.py
"""

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # small and shared machines: one thread is enough here
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no progress bars between the test dots

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from transformers.utils import logging as transformers_logging  # noqa: E402

from hflm import tiny  # noqa: E402
from hflm.model_dir import check_model_dir  # noqa: E402
from hflm.submission import SubmissionError, inspect, main, materialise, repair_tokenizer_config  # noqa: E402

transformers_logging.disable_progress_bar()
transformers_logging.set_verbosity_error()

TEXTS = ["Question: Tom has 3 apples and buys 4 more.\nAnswer: 3 + 4 = 7\nThe answer is 7\n", "def add(a, b):\n    return a + b\n"] * 10
BASE_ID = "Qwen/Qwen2.5-1.5B"
IDS = torch.tensor([[5, 17, 42, 99, 7, 3]])


def setUpModule():
    global ROOT, BASE, FULL, ADAPTER, ADAPTER_LOGITS
    ROOT = tempfile.mkdtemp(prefix="hflm-submission-")
    BASE = tiny.build(os.path.join(ROOT, "base"), TEXTS, seed=1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.add_(0.05 * torch.randn_like(model.model.layers[0].mlp.down_proj.weight))
    FULL = os.path.join(ROOT, "full")
    model.save_pretrained(FULL)
    AutoTokenizer.from_pretrained(BASE).save_pretrained(FULL)

    # init_lora_weights=False: random A and B, so the adapter changes the outputs as trained weights would.
    base = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
    adapter = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    adapter.eval()
    with torch.no_grad():
        ADAPTER_LOGITS = adapter(IDS).logits
    ADAPTER = os.path.join(ROOT, "adapter")
    adapter.save_pretrained(ADAPTER)


def tearDownModule():
    shutil.rmtree(ROOT, ignore_errors=True)


def copy_of(source, name):
    path = os.path.join(ROOT, name)
    shutil.copytree(source, path)
    return path


def edit_json(path, **changes):
    with open(path) as f:
        value = json.load(f)
    value.update(changes)
    with open(path, "w") as f:
        json.dump(value, f)


def digest(folder):
    """Names and contents of everything under folder: what a refusal must leave as it was."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(folder)):
        for name in sorted(filenames + dirnames):
            path = os.path.join(dirpath, name)
            h.update(path.encode())
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def logits(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(IDS).logits


class FullModels(unittest.TestCase):
    def test_a_fine_tuned_copy_is_accepted_and_copied_as_it_is(self):
        inspection = inspect(FULL, BASE, BASE_ID)
        self.assertEqual((inspection.kind, inspection.tokenizer, inspection.notes), ("full", "submission", []))
        out = os.path.join(ROOT, "full-out")
        materialise(FULL, BASE, out, BASE_ID)
        check_model_dir(out)  # what hflm.inference loads
        self.assertEqual(sorted(os.listdir(out)), inspection.files)
        for name in inspection.files:
            with open(os.path.join(FULL, name), "rb") as a, open(os.path.join(out, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        self.assertTrue(torch.equal(logits(out), logits(FULL)))

    def test_graders_link_a_full_models_weights_instead_of_copying_them(self):
        out = os.path.join(ROOT, "full-linked")
        inspection = materialise(FULL, BASE, out, BASE_ID, link_weights=True)
        check_model_dir(out)
        linked = sorted(name for name in os.listdir(out) if os.path.islink(os.path.join(out, name)))
        self.assertIn("model.safetensors", linked)
        for name in linked:
            self.assertEqual(os.readlink(os.path.join(out, name)), os.path.abspath(os.path.join(FULL, name)))
        self.assertEqual(sorted(os.listdir(out)), inspection.files)
        self.assertTrue(torch.equal(logits(out), logits(FULL)))

    def test_a_trainer_folder_leaves_its_state_and_checkpoints_out(self):
        folder = copy_of(FULL, "trainer")
        for name in ("training_args.bin", "optimizer.pt"):
            open(os.path.join(folder, name), "wb").close()
        os.mkdir(os.path.join(folder, "checkpoint-10"))
        open(os.path.join(folder, "checkpoint-10", "pytorch_model.bin"), "wb").close()
        inspection = inspect(folder, BASE)
        self.assertEqual(len(inspection.notes), 2)
        self.assertIn("checkpoint-10/", inspection.notes[0])
        self.assertIn("optimizer.pt, training_args.bin", inspection.notes[1])
        out = os.path.join(ROOT, "trainer-out")
        materialise(folder, BASE, out)
        self.assertEqual(sorted(os.listdir(out)), sorted(os.listdir(FULL)))

    def test_without_tokenizer_files_the_base_tokenizer_is_used_and_said(self):
        folder = copy_of(FULL, "no-tokenizer")
        os.remove(os.path.join(folder, "tokenizer.json"))  # a tokenizer_config.json alone is no tokenizer
        inspection = inspect(folder, BASE)
        self.assertEqual(inspection.tokenizer, "base")
        self.assertIn("the base model's tokenizer is used", inspection.notes[0])
        out = os.path.join(ROOT, "no-tokenizer-out")
        materialise(folder, BASE, out)
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            with open(os.path.join(BASE, name), "rb") as a, open(os.path.join(out, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)


class Adapters(unittest.TestCase):
    def test_a_lora_adapter_is_merged_and_gives_the_adapter_models_logits(self):
        inspection = inspect(ADAPTER, BASE, BASE_ID)
        self.assertEqual((inspection.kind, inspection.tokenizer, inspection.adapter_base), ("lora", "base", BASE))
        out = os.path.join(ROOT, "adapter-out")
        materialise(ADAPTER, BASE, out, BASE_ID)
        check_model_dir(out)  # a full model now, which hflm.inference loads
        merged = logits(out)
        torch.testing.assert_close(merged, ADAPTER_LOGITS, atol=1e-5, rtol=0)
        self.assertGreater((merged - logits(BASE)).abs().max().item(), 1e-3)  # the merge changed the model
        self.assertEqual(AutoTokenizer.from_pretrained(out)("The answer is 7").input_ids,
                         AutoTokenizer.from_pretrained(BASE)("The answer is 7").input_ids)

        again = os.path.join(ROOT, "adapter-out-again")
        materialise(ADAPTER, BASE, again, BASE_ID)
        self.assertEqual(sorted(os.listdir(out)), sorted(os.listdir(again)))
        for name in os.listdir(out):
            with open(os.path.join(out, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{name}: the merge is not deterministic")


    def test_an_adapter_is_merged_in_the_dtype_its_gpu_decodes_in_and_in_float32_on_cpu(self):
        from unittest import mock

        from safetensors import safe_open

        from hflm import gpu

        def merged_dtypes(name, capabilities):
            out = os.path.join(ROOT, name)
            if capabilities is None:  # this host: a CPU build of torch, no GPU
                materialise(ADAPTER, BASE, out, BASE_ID)
            else:  # a GPU host's answers (hflm.gpu reads them without a CUDA context)
                with mock.patch.object(gpu, "unusable_reason", return_value=None), \
                        mock.patch.object(gpu, "capabilities", return_value=capabilities):
                    materialise(ADAPTER, BASE, out, BASE_ID)
            with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
                return {f.get_tensor(k).dtype for k in f.keys()}, out

        self.assertEqual(merged_dtypes("merged-ampere", [(8, 0)])[0], {torch.bfloat16})
        self.assertEqual(merged_dtypes("merged-turing", [(7, 5)])[0], {torch.float16})
        on_cpu, out = merged_dtypes("merged-cpu", None)
        self.assertEqual(on_cpu, {torch.float32})  # the tiny base is stored in float32: merged and kept in it
        # Merged in half precision, the model is still the adapter's, within that precision's rounding.
        half = logits(os.path.join(ROOT, "merged-ampere"))
        torch.testing.assert_close(half, ADAPTER_LOGITS, atol=0.1, rtol=0.05)
        torch.testing.assert_close(logits(out), ADAPTER_LOGITS, atol=1e-5, rtol=0)

    def test_an_adapter_of_lm_head_saved_as_peft_saves_it_by_default_is_accepted(self):
        # PEFT then stores lm_head's base layer beside its LoRA weights (save_embedding_layers="auto").
        torch.manual_seed(0)
        base = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
        adapter = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "lm_head"], init_lora_weights=False))
        adapter.eval()
        with torch.no_grad():
            expected = adapter(IDS).logits
        folder = os.path.join(ROOT, "adapter-lm-head")
        adapter.save_pretrained(folder)
        out = os.path.join(ROOT, "adapter-lm-head-out")
        self.assertEqual(materialise(folder, BASE, out, BASE_ID).kind, "lora")
        torch.testing.assert_close(logits(out), expected, atol=1e-5, rtol=0)

    def test_an_adapter_with_its_own_tokenizer_keeps_it_repaired(self):
        folder = copy_of(ADAPTER, "adapter-tokenizer")
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            shutil.copyfile(os.path.join(BASE, name), os.path.join(folder, name))
        edit_json(os.path.join(folder, "tokenizer_config.json"), extra_special_tokens=["<|im_start|>"])
        out = os.path.join(ROOT, "adapter-tokenizer-out")
        inspection = materialise(folder, BASE, out)
        self.assertEqual((inspection.tokenizer, len(inspection.tokenizer_repairs)), ("submission", 1))
        with open(os.path.join(out, "tokenizer_config.json")) as f:
            self.assertEqual(json.load(f)["additional_special_tokens"], ["<|im_start|>"])


class Refusals(unittest.TestCase):
    def assertRefused(self, folder, code, *message_parts, base_id=BASE_ID):
        before = digest(folder) if os.path.isdir(folder) else None
        out = os.path.join(ROOT, f"out-{code}")
        with self.assertRaises(SubmissionError) as refused:
            materialise(folder, BASE, out, base_id)
        self.assertEqual(refused.exception.code, code, str(refused.exception))
        for part in message_parts:
            self.assertIn(part, str(refused.exception))
        self.assertFalse(os.path.lexists(out))
        self.assertFalse(os.path.lexists(out + ".partial"))
        if before is not None:
            self.assertEqual(digest(folder), before, "a refusal changed the submitted folder")
        return refused.exception

    def test_not_a_folder(self):
        self.assertRefused(os.path.join(FULL, "config.json"), "not_a_folder", "save_pretrained")

    def test_no_config(self):
        folder = copy_of(FULL, "no-config")
        os.remove(os.path.join(folder, "config.json"))
        self.assertRefused(folder, "missing_config", "config.json", "adapter_config.json")

    def test_no_weights_and_a_broken_config(self):
        folder = copy_of(FULL, "no-weights")
        os.remove(os.path.join(folder, "model.safetensors"))
        self.assertRefused(folder, "missing_weights", "*.safetensors", "safe_serialization=True")
        folder = copy_of(FULL, "broken-config")
        with open(os.path.join(folder, "config.json"), "a") as f:
            f.write("}")
        self.assertRefused(folder, "invalid_config", "not valid JSON", "save_pretrained")

    def test_pickled_weights(self):
        for name in ("pytorch_model.bin", "model.pt", "weights.pth", "model.pkl"):
            folder = copy_of(FULL, f"pickle-{name}")
            open(os.path.join(folder, name), "wb").close()
            self.assertRefused(folder, "pickled_weights", name, "safe_serialization=True")

    def test_custom_code(self):
        folder = copy_of(FULL, "auto-map")
        edit_json(os.path.join(folder, "config.json"), auto_map={"AutoModelForCausalLM": "modeling_x.X"})
        self.assertRefused(folder, "remote_code", "trust_remote_code is never enabled")
        folder = copy_of(FULL, "tokenizer-auto-map")
        edit_json(os.path.join(folder, "tokenizer_config.json"), auto_map={"AutoTokenizer": ["tok.T", None]})
        self.assertRefused(folder, "remote_code", "trust_remote_code is never enabled")

    def test_another_architecture(self):
        folder = copy_of(FULL, "deeper")
        edit_json(os.path.join(folder, "config.json"), num_hidden_layers=3)
        self.assertRefused(folder, "architecture_mismatch", "num_hidden_layers", "fine-tuned copy of the run's base model")

    def test_a_tokenizer_with_more_tokens_than_embeddings(self):
        folder = copy_of(FULL, "more-tokens")
        tokenizer = AutoTokenizer.from_pretrained(FULL)
        tokenizer.add_tokens(["<tool>", "</tool>"])
        tokenizer.save_pretrained(folder)
        self.assertRefused(folder, "vocabulary_mismatch", "resize_token_embeddings")

    def test_too_large(self):
        folder = copy_of(FULL, "too-large")
        with open(os.path.join(folder, "notes.txt"), "wb") as f:
            f.write(b"x" * os.path.getsize(os.path.join(BASE, "model.safetensors")))
        self.assertRefused(folder, "too_large", "float32", "save_pretrained")
        adapter = copy_of(ADAPTER, "adapter-too-large")
        with open(os.path.join(adapter, "README.md"), "ab") as f:
            f.write(b"x" * os.path.getsize(os.path.join(BASE, "model.safetensors")))
        self.assertRefused(adapter, "too_large", "1 x the base model")

    def test_links_and_special_files(self):
        folder = copy_of(FULL, "linked")
        os.symlink(os.path.join(BASE, "model.safetensors"), os.path.join(folder, "extra.safetensors"))
        self.assertRefused(folder, "link", "extra.safetensors", "copy the file into the folder")
        os.symlink(FULL, os.path.join(ROOT, "link-to-folder"))
        self.assertRefused(os.path.join(ROOT, "link-to-folder"), "not_a_folder")
        folder = copy_of(FULL, "fifo")
        os.mkfifo(os.path.join(folder, "pipe"))
        self.assertRefused(folder, "special_file", "pipe")

    def test_an_adapter_trained_on_another_model(self):
        folder = copy_of(ADAPTER, "adapter-llama")
        edit_json(os.path.join(folder, "adapter_config.json"), base_model_name_or_path="meta-llama/Llama-3.1-8B")
        self.assertRefused(folder, "adapter_base_mismatch", "meta-llama/Llama-3.1-8B", BASE_ID)
        inspect(folder, BASE)  # without the run's hub id, the name alone cannot refuse; the shapes fit
        for where_the_agent_saw_it in ("/workspace/models/base", "models/Qwen2.5-1.5B", "qwen/qwen2.5-1.5b"):
            edit_json(os.path.join(folder, "adapter_config.json"), base_model_name_or_path=where_the_agent_saw_it)
            self.assertEqual(inspect(folder, BASE, BASE_ID).adapter_base, where_the_agent_saw_it)

        wider = tiny.build(os.path.join(ROOT, "wider-base"), TEXTS, seed=1, hidden_size=64)
        other = get_peft_model(AutoModelForCausalLM.from_pretrained(wider), LoraConfig(r=4, target_modules=["q_proj"]))
        other.save_pretrained(os.path.join(ROOT, "adapter-wider"))
        self.assertRefused(os.path.join(ROOT, "adapter-wider"), "adapter_base_mismatch", "q_proj", "shape")

        folder = copy_of(ADAPTER, "adapter-gpt2")
        edit_json(os.path.join(folder, "adapter_config.json"), target_modules=["c_attn"])
        self.assertRefused(folder, "adapter_base_mismatch", "c_attn")

    def test_other_adapters_and_missing_adapter_weights(self):
        folder = copy_of(ADAPTER, "adapter-ia3")
        edit_json(os.path.join(folder, "adapter_config.json"), peft_type="IA3")
        self.assertRefused(folder, "unsupported_adapter", "IA3", "LoraConfig")
        folder = copy_of(ADAPTER, "adapter-no-weights")
        os.remove(os.path.join(folder, "adapter_model.safetensors"))
        self.assertRefused(folder, "missing_weights", "safe_serialization=True")

    def test_a_tokenizer_that_does_not_load_gives_the_loaders_message(self):
        folder = copy_of(FULL, "bad-tokenizer")
        edit_json(os.path.join(folder, "tokenizer_config.json"), extra_special_tokens="<|im_end|>")
        self.assertRefused(folder, "tokenizer_unloadable", "TypeError", "extra_special_tokens must be a list")


class TokenizerRepair(unittest.TestCase):
    def test_list_valued_extra_special_tokens_are_moved_to_additional_special_tokens(self):
        added = {"content": "<|im_start|>", "lstrip": False, "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for extra in (["<|im_start|>"], [added]):
            folder = copy_of(FULL, f"repair-{len(json.dumps(extra))}")
            path = os.path.join(folder, "tokenizer_config.json")
            edit_json(path, extra_special_tokens=extra)
            changes = repair_tokenizer_config(folder)
            self.assertEqual(len(changes), 1)
            self.assertIn("additional_special_tokens", changes[0])
            with open(path) as f:
                config = json.load(f)
            self.assertNotIn("extra_special_tokens", config)
            self.assertEqual(config["additional_special_tokens"], ["<|im_start|>"])
            self.assertEqual(AutoTokenizer.from_pretrained(folder).extra_special_tokens, ["<|im_start|>"])

    def test_materialise_repairs_the_copy_and_not_the_submission(self):
        folder = copy_of(FULL, "repair-copy")
        edit_json(os.path.join(folder, "tokenizer_config.json"), extra_special_tokens=["<|im_start|>"])
        before = digest(folder)
        out = os.path.join(ROOT, "repair-copy-out")
        inspection = materialise(folder, BASE, out)
        self.assertEqual(len(inspection.tokenizer_repairs), 1)
        self.assertEqual(digest(folder), before)
        with open(os.path.join(out, "tokenizer_config.json")) as f:
            self.assertEqual(json.load(f)["additional_special_tokens"], ["<|im_start|>"])

    def test_a_sound_config_is_left_byte_for_byte(self):
        folder = copy_of(FULL, "sound")
        before = digest(folder)
        self.assertEqual(repair_tokenizer_config(folder), [])
        self.assertEqual(digest(folder), before)


class CommandLine(unittest.TestCase):
    def test_check_prints_one_json_line(self):
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            self.assertEqual(main(["check", ADAPTER, "--base", BASE]), 0)
        result = json.loads(stdout.getvalue())
        self.assertEqual((result["ok"], result["kind"]), (True, "lora"))

    def test_a_refused_folder_exits_2_with_the_error(self):
        folder = copy_of(FULL, "cli-pickle")
        open(os.path.join(folder, "pytorch_model.bin"), "wb").close()
        out = os.path.join(ROOT, "cli-out")
        run = subprocess.run(
            [sys.executable, "-m", "hflm.submission", "materialise", folder, "--base", BASE, "--out", out],
            cwd=TASKS, capture_output=True, text=True,
        )
        self.assertEqual(run.returncode, 2, run.stderr)
        error = json.loads(run.stdout)
        self.assertEqual((error["ok"], error["code"]), (False, "pickled_weights"))
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
