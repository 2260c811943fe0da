"""What an agent may submit on the full tier, and how it becomes one model folder to grade.

    from hflm.submission import inspect, materialise, repair_tokenizer_config, SubmissionError
    inspect(folder, base_dir, base_id=None)             # -> Inspection (kind "full" or "lora"); or SubmissionError
    materialise(folder, base_dir, out_dir, base_id=None)  # -> Inspection; out_dir is a full model folder
    repair_tokenizer_config(folder)                     # -> the changes made; or SubmissionError

    python -m hflm.submission check FOLDER --base BASE_DIR [--base-id ORG/NAME]
    python -m hflm.submission materialise FOLDER --base BASE_DIR --out OUT_DIR [--base-id ORG/NAME]
        one JSON line on stdout; exit 2 with {"ok": false, "code", "message"} when the folder is refused

A submission is either a full model folder (config.json, *.safetensors, tokenizer files: what
save_pretrained writes) or a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors),
which is merged onto the run's base model. The reference harness rejects adapters; here they are
graded as the merged model they stand for. Only the folder's top-level files are read: subfolders
(a Trainer's checkpoint-*/) are ignored, and a Trainer's own pickles (training_args.bin, ...) are left
out unread. Refused, each with what to do instead, before anything is written: pickled weights,
configs that need the model's own code (trust_remote_code is never enabled), another architecture
than the base's, an adapter that does not fit the base, a tokenizer that cannot cover or load, links
and special files, and a folder larger than the cap relative to the base model.
"""

import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile

from hflm import gpu
from hflm.folders import built_aside
from hflm.model_dir import PICKLE_SUFFIXES

SAFE_SAVE = "model.save_pretrained(dir, safe_serialization=True) and tokenizer.save_pretrained(dir)"
# Files a Trainer writes beside the model (optimizer state, its arguments): pickles, but never weights,
# so they are left out unread instead of refusing the usual `trainer.save_model(dir)` folder.
TRAINER_STATE_FILES = ("training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pth")
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "chat_template.json",
)
TOKENIZER_VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model")
# What makes a model the base model's architecture; vocab_size may grow (added tokens) and is checked
# against the tokenizer instead.
ARCHITECTURE_KEYS = (
    "model_type", "architectures", "hidden_size", "num_hidden_layers", "intermediate_size",
    "num_attention_heads", "num_key_value_heads",
)
FULL_SIZE_FACTOR = 1.5  # a full model may be at most 1.5 x the base (weights + tokenizer files)
ADAPTER_SIZE_FACTOR = 1.0  # an adapter at most the base's size: anything bigger is not an adapter


class SubmissionError(ValueError):
    """A refused submission: `code` names the rule, the message says what to do instead."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code

    def to_json(self):
        return {"ok": False, "code": self.code, "message": str(self)}


@dataclasses.dataclass
class Inspection:
    kind: str  # "full" or "lora"
    files: list  # the top-level files that make the model, sorted
    size_bytes: int
    size_cap_bytes: int
    tokenizer: str  # "submission" or "base": whose tokenizer the graded model uses
    notes: list  # what was left out or fallen back on
    tokenizer_repairs: list  # what repair_tokenizer_config changes in the graded copy
    adapter_base: str = None  # an adapter's base_model_name_or_path, as written

    def to_json(self):
        return {"ok": True, **dataclasses.asdict(self)}


def read_json(path, code, what_to_do):
    try:
        with open(path) as f:
            value = json.load(f)
    except ValueError as e:
        raise SubmissionError(code, f"{path} is not valid JSON ({e}): {what_to_do}") from None
    if not isinstance(value, dict):
        raise SubmissionError(code, f"{path} is not a JSON object: {what_to_do}")
    return value


def top_level_files(folder):
    """The folder's regular files by name, and notes on what is ignored; links and special files refused."""
    if os.path.islink(folder) or not os.path.isdir(folder):
        raise SubmissionError("not_a_folder", f"{folder} is not a folder: submit the folder that {SAFE_SAVE} wrote")
    files, ignored = [], []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_symlink():
            raise SubmissionError(
                "link", f"{entry.path} is a symbolic link; only files inside the submitted folder are read: "
                "copy the file into the folder instead of linking it",
            )
        if entry.is_dir(follow_symlinks=False):
            ignored.append(entry.name + "/")
        elif entry.is_file(follow_symlinks=False):
            files.append(entry.name)
        else:
            raise SubmissionError("special_file", f"{entry.path} is not a regular file: remove it from the folder")
    notes = [f"ignored subfolders (only top-level files are read): {', '.join(ignored)}"] if ignored else []
    return files, notes


def model_size(folder, names):
    return sum(os.path.getsize(os.path.join(folder, n)) for n in names)


def base_size(base_dir):
    """The base model's weights plus tokenizer files, in bytes: what the size caps are relative to."""
    names = os.listdir(base_dir)
    return model_size(base_dir, [n for n in names if n.endswith(".safetensors") or n in TOKENIZER_FILES])


def has_own_tokenizer(names):
    return "tokenizer_config.json" in names and any(n in names for n in TOKENIZER_VOCABULARY_FILES)


def repaired_tokenizer_config(config):
    """(config, changes): the known tokenizer_config.json breakages repaired, in a new dict.

    A list-valued `extra_special_tokens` (what transformers 5 and TRL save) breaks transformers 4 and the
    vLLM builds on it, which want a dict there (the reference tells agents to delete the field); a list of
    AddedToken dicts breaks transformers 5 too. Moved to `additional_special_tokens` as plain strings, it
    loads under both: transformers 5 reads that key back into `extra_special_tokens`.
    """
    extra = config.get("extra_special_tokens")
    if not isinstance(extra, list):
        return config, []
    tokens = [t["content"] if isinstance(t, dict) and "content" in t else t for t in extra]
    existing = config.get("additional_special_tokens") or []
    merged = list(existing) + [t for t in tokens if t not in existing]
    repaired = {k: v for k, v in config.items() if k != "extra_special_tokens"}
    repaired["additional_special_tokens"] = merged
    return repaired, [
        f"tokenizer_config.json: the list extra_special_tokens {json.dumps(extra)} moved to "
        f"additional_special_tokens {json.dumps(merged)}"
    ]


def load_tokenizer(folder):
    """The tokenizer at folder, or SubmissionError with the loader's message."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as e:  # the loader's own message is the most useful thing to pass on
        raise SubmissionError(
            "tokenizer_unloadable", f"the tokenizer in {folder} does not load ({type(e).__name__}: {e}): "
            "save it again with tokenizer.save_pretrained(dir), or leave the tokenizer files out to use the base model's",
        ) from None


def repair_tokenizer_config(folder):
    """Repair folder/tokenizer_config.json in place and check the tokenizer loads; returns the changes.

    The repaired file is tried on a copy first, so a tokenizer that still does not load leaves the
    folder as it was.
    """
    path = os.path.join(folder, "tokenizer_config.json")
    config = read_json(path, "tokenizer_unloadable", "save it again with tokenizer.save_pretrained(dir)")
    if "auto_map" in config:
        raise SubmissionError(
            "remote_code", f"{path} has an auto_map (the tokenizer needs its own Python code) and trust_remote_code "
            "is never enabled: save a tokenizer that transformers ships, or leave the tokenizer files out",
        )
    repaired, changes = repaired_tokenizer_config(config)
    with tempfile.TemporaryDirectory(prefix="hflm-tokenizer-") as trial:
        for name in TOKENIZER_FILES:
            if os.path.isfile(os.path.join(folder, name)):
                shutil.copyfile(os.path.join(folder, name), os.path.join(trial, name))
        write_json(os.path.join(trial, "tokenizer_config.json"), repaired)
        load_tokenizer(trial)
    if changes:
        write_json(path, repaired)
    return changes


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def tokenizer_size(folder, names):
    """(len() of the tokenizer in folder, the repairs it needs), loaded from a repaired copy."""
    with tempfile.TemporaryDirectory(prefix="hflm-tokenizer-") as trial:
        for name in names:
            if name in TOKENIZER_FILES:
                shutil.copyfile(os.path.join(folder, name), os.path.join(trial, name))
        changes = repair_tokenizer_config(trial)
        return len(load_tokenizer(trial)), changes


def check_no_pickles(folder, names):
    pickles = [n for n in names if n.endswith(PICKLE_SUFFIXES) and n not in TRAINER_STATE_FILES]
    if pickles:
        raise SubmissionError(
            "pickled_weights", f"{folder} holds pickled files ({', '.join(pickles)}), which are never loaded "
            f"(unpickling runs code): delete them and save with {SAFE_SAVE}",
        )


def check_architecture(folder, config, base_config):
    if "auto_map" in config:
        raise SubmissionError(
            "remote_code", f"{folder}/config.json has an auto_map (the model needs its own Python code) and "
            "trust_remote_code is never enabled: fine-tune the base model with its transformers architecture",
        )
    for key in ARCHITECTURE_KEYS:
        if key in base_config and config.get(key) != base_config[key]:
            raise SubmissionError(
                "architecture_mismatch", f"{folder}/config.json has {key} = {json.dumps(config.get(key))}, the base "
                f"model {json.dumps(base_config[key])}: submit a fine-tuned copy of the run's base model",
            )


def tensor_shapes(folder, names):
    """{tensor name: shape} from the safetensors headers, without reading the weights."""
    from safetensors import safe_open

    shapes = {}
    for name in names:
        if name.endswith(".safetensors"):
            with safe_open(os.path.join(folder, name), framework="pt") as f:
                for key in f.keys():
                    shapes[key] = list(f.get_slice(key).get_shape())
    return shapes


# A LoRA tensor's name ends in one of these; the dimension of the base weight [out, in] it must match.
LORA_PARTS = {
    ".lora_A.weight": (1, 1), ".lora_B.weight": (0, 0), ".lora_embedding_A": (1, 0),
    ".lora_embedding_B": (0, 1), ".lora_magnitude_vector": (0, 0),
}


def check_adapter_fits(folder, adapter_config, adapter_shapes, base_shapes, base_config):
    mismatch = lambda why: SubmissionError(  # noqa: E731
        "adapter_base_mismatch", f"{folder}: {why}: train the adapter on the run's base model (get_peft_model on it)",
    )
    base_modules = {k[: -len(".weight")] for k in base_shapes if k.endswith(".weight")}
    if base_config.get("tie_word_embeddings") and "model.embed_tokens" in base_modules:
        base_modules.add("lm_head")  # a tied lm_head is stored once, as the embeddings
    targets = adapter_config.get("target_modules")
    if isinstance(targets, list):
        missing = [t for t in targets if not any(m == t or m.endswith("." + t) for m in base_modules)]
        if missing:
            raise mismatch(f"target_modules {missing} name no module of the base model")
    if not adapter_shapes:
        raise mismatch("adapter_model.safetensors holds no tensors")
    for key, shape in sorted(adapter_shapes.items()):
        name = re.sub(r"^base_model\.model\.", "", key)
        part = next((p for p in LORA_PARTS if name.endswith(p)), None)
        module = name[: -len(part)] if part else re.sub(r"\.weight$", "", name)
        # PEFT saves the wrapped base layer of an adapted lm_head or embedding too (save_embedding_layers="auto"):
        # a full copy of that base tensor.
        module = re.sub(r"\.base_layer$", "", module)
        base_key = module + ".weight"
        if base_key not in base_shapes and module == "lm_head":
            base_key = "model.embed_tokens.weight"
        if base_key not in base_shapes:
            raise mismatch(f"{key} adapts {module}, which the base model does not have")
        base_shape = base_shapes[base_key]
        if part is None:  # modules_to_save: a full copy of the base tensor
            fits = shape == base_shape
        else:
            base_dim, dim = LORA_PARTS[part]
            fits = len(base_shape) == 2 and base_shape[base_dim] == shape[dim]
        if not fits:
            raise mismatch(f"{key} has shape {shape}, which does not fit the base model's {base_key} {base_shape}")


def check_adapter_base_name(folder, name, base_id, base_dir):
    """An adapter that names a hub model other than the run's base was trained on another model.

    A path names wherever the agent's sandbox mounted the base, which says nothing here: the tensor
    shapes decide then. A relative path of two parts reads like a hub id, so it fits when it ends in
    the base's name or its folder's.
    """
    is_hub_id = isinstance(name, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", name) is not None
    if not (base_id and is_hub_id):
        return
    fitting_names = {base_id.split("/")[-1].lower(), os.path.basename(os.path.normpath(base_dir)).lower()}
    if name.lower() != base_id.lower() and name.split("/")[-1].lower() not in fitting_names:
        raise SubmissionError(
            "adapter_base_mismatch", f"{folder}/adapter_config.json says the adapter was trained on {name}; this run's "
            f"base model is {base_id}: train the adapter on {base_id}",
        )


def inspect(folder, base_dir, base_id=None):
    """What folder is, checked against the base model at base_dir; SubmissionError when refused."""
    names, notes = top_level_files(folder)
    check_no_pickles(folder, names)
    left_out = [n for n in names if n in TRAINER_STATE_FILES]
    if left_out:
        notes.append(f"left out unread (a Trainer's state, not the model): {', '.join(left_out)}")
        names = [n for n in names if n not in left_out]
    base_names = sorted(os.listdir(base_dir))
    with open(os.path.join(base_dir, "config.json")) as f:
        base_config = json.load(f)
    if "adapter_config.json" in names:
        kind, factor = "lora", ADAPTER_SIZE_FACTOR
    elif "config.json" in names:
        kind, factor = "full", FULL_SIZE_FACTOR
    else:
        raise SubmissionError(
            "missing_config", f"{folder} has neither config.json (a full model) nor adapter_config.json (a LoRA "
            f"adapter): save with {SAFE_SAVE}, or peft_model.save_pretrained(dir) for an adapter",
        )
    # The cap first: it needs no more than file sizes, and nothing bigger is read.
    cap = int(factor * base_size(base_dir))
    size = model_size(folder, names)
    if size > cap:
        raise SubmissionError(
            "too_large", f"{folder} holds {size} bytes, over the cap of {cap} ({factor:g} x the base model's weights "
            f"and tokenizer): save the weights in the base's dtype ({base_config.get('dtype', 'as the base')}), "
            "e.g. model.to(torch.bfloat16).save_pretrained(dir), and leave other files out",
        )

    if kind == "lora":
        adapter_config = read_json(
            os.path.join(folder, "adapter_config.json"), "invalid_config",
            "save the adapter with peft_model.save_pretrained(dir)",
        )
        if adapter_config.get("peft_type") != "LORA":
            raise SubmissionError(
                "unsupported_adapter", f"{folder} holds a {adapter_config.get('peft_type')} adapter; only LoRA adapters "
                f"are merged: train with peft.LoraConfig, or merge it yourself and submit the full model ({SAFE_SAVE})",
            )
        if "adapter_model.safetensors" not in names:
            raise SubmissionError(
                "missing_weights", f"{folder} has no adapter_model.safetensors: save the adapter with "
                "peft_model.save_pretrained(dir, safe_serialization=True)",
            )
        adapter_base = adapter_config.get("base_model_name_or_path")
        check_adapter_base_name(folder, adapter_base, base_id, base_dir)
        check_adapter_fits(
            folder, adapter_config, tensor_shapes(folder, ["adapter_model.safetensors"]),
            tensor_shapes(base_dir, base_names), base_config,
        )
        model_vocabulary = base_config.get("vocab_size")
    else:
        adapter_base = None
        config = read_json(os.path.join(folder, "config.json"), "invalid_config", f"save with {SAFE_SAVE}")
        check_architecture(folder, config, base_config)
        if not any(n.endswith(".safetensors") for n in names):
            raise SubmissionError("missing_weights", f"{folder} has no *.safetensors weights: save with {SAFE_SAVE}")
        model_vocabulary = config.get("vocab_size")

    if has_own_tokenizer(names):
        tokenizer, (vocabulary, repairs) = "submission", tokenizer_size(folder, names)
    else:
        tokenizer, (vocabulary, repairs) = "base", tokenizer_size(base_dir, base_names)
        notes.append(
            "no tokenizer files (tokenizer_config.json with tokenizer.json, vocab.json or tokenizer.model): "
            "the base model's tokenizer is used"
        )
    if model_vocabulary is not None and vocabulary > model_vocabulary:
        raise SubmissionError(
            "vocabulary_mismatch", f"the {tokenizer}'s tokenizer has {vocabulary} tokens, the model embeds only "
            f"{model_vocabulary}: after adding tokens call model.resize_token_embeddings(len(tokenizer)) and save both",
        )
    return Inspection(kind, names, size, cap, tokenizer, notes, repairs, adapter_base)


def materialise(folder, base_dir, out_dir, base_id=None, link_weights=False):
    """Write the full model folder that grading loads to out_dir (which must not exist); returns the Inspection.

    A full model is copied file by file (with link_weights, its weight and config files are symbolic links to
    folder's instead: for a caller that keeps folder in place, unchanged, while out_dir is read, as the grading
    sandbox keeps its read-only checkpoint, so a 1.5B model's baseline copies no 3 GB first), an adapter merged
    onto the base; the tokenizer files are the submission's or, without them, the base's; then
    tokenizer_config.json is repaired. Everything is written to a sibling folder renamed into place at the end,
    so a refusal or a crash leaves no out_dir.
    The same submission and base give the same files.
    """
    if os.path.lexists(out_dir):
        raise FileExistsError(f"{out_dir} exists: materialise writes a new folder")
    inspection = inspect(folder, base_dir, base_id)
    with built_aside(out_dir) as partial:
        if inspection.kind == "full":
            for name in inspection.files:
                if name not in TOKENIZER_FILES:
                    source = os.path.abspath(os.path.join(folder, name))
                    if link_weights:
                        os.symlink(source, os.path.join(partial, name))
                    else:
                        shutil.copyfile(source, os.path.join(partial, name))
        else:
            merge_adapter(folder, base_dir, partial)
        if inspection.tokenizer == "submission":
            tokenizer_dir, tokenizer_names = folder, inspection.files
        else:
            tokenizer_dir, tokenizer_names = base_dir, sorted(os.listdir(base_dir))
        for name in tokenizer_names:
            if name in TOKENIZER_FILES:
                shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(partial, name))
        repair_tokenizer_config(partial)
    return inspection


def merge_dtype():
    """The dtype an adapter is merged in where a GPU decodes the result: the one it decodes in (hflm.gpu.dtype_for:
    bfloat16, or float16 before Ampere), so the merge holds the base at half of float32's bytes within the job's
    memory limit; None where no GPU can be used (CPU decodes in float32). Makes no CUDA context here."""
    if gpu.unusable_reason() is not None:
        return None
    return gpu.dtype_for(gpu.capabilities())


def merge_adapter(adapter_dir, base_dir, out_dir):
    """The base model with the LoRA adapter merged in, saved as safetensors.

    Where a GPU will decode it (merge_dtype), merged and saved in that GPU's dtype: a 1.5B model's merge then needs
    about 3 GB, not float32's 6 GB plus the cast copy. On CPU, merged in float32 and cast once to the dtype the base
    is stored in, so the only rounding is the one any saved model of that dtype has. Either way on the CPU: a CUDA
    context here would keep vLLM from forking its engine later in this process.
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the loading bar is noise on the command line's stderr

    on_gpu = merge_dtype()
    if on_gpu is None:
        with open(os.path.join(base_dir, "config.json")) as f:
            base_config = json.load(f)
        merged_in = torch.float32
        saved_as = getattr(torch, str(base_config.get("dtype") or base_config.get("torch_dtype") or "float32"))
    else:
        merged_in = saved_as = getattr(torch, on_gpu)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=merged_in, trust_remote_code=False)
    merged = PeftModel.from_pretrained(base, adapter_dir, is_trainable=False).merge_and_unload()
    merged.to(saved_as).save_pretrained(out_dir, safe_serialization=True)


def main(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m hflm.submission", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("check", "materialise"))
    parser.add_argument("folder", help="the submitted folder")
    parser.add_argument("--base", required=True, help="the run's base model folder")
    parser.add_argument("--base-id", help="the base model's hub id, e.g. Qwen/Qwen2.5-1.5B")
    parser.add_argument("--out", help="materialise: the full model folder to write (must not exist)")
    args = parser.parse_args(argv)
    if args.command == "materialise" and not args.out:
        parser.error("materialise needs --out")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # stderr stays for real errors
    try:
        if args.command == "check":
            result = inspect(args.folder, args.base, args.base_id).to_json()
        else:
            result = {**materialise(args.folder, args.base, args.out, args.base_id).to_json(), "out": args.out}
    except SubmissionError as e:
        print(json.dumps(e.to_json()))
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
