"""What a loadable model folder is, and the clear refusal of anything else.

    from hflm.model_dir import check_model_dir, ModelFolderError
    check_model_dir(path)        # returns nothing; raises ModelFolderError saying what to do instead

A model folder is what `model.save_pretrained(dir)` and `tokenizer.save_pretrained(dir)` write:
config.json, the weights as *.safetensors (one file, or shards with model.safetensors.index.json)
and the tokenizer files. Refused, each with the fix in the message:
- pickled weights (*.bin, *.pt, *.pth, *.pkl, *.ckpt): unpickling runs code, so only safetensors are read;
- a PEFT LoRA adapter (adapter_config.json): this library loads full models;
- a config that needs the model's own Python code (`auto_map`): `trust_remote_code` is never enabled.
"""

import json
import os

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
SAVE_HINT = "save the model with model.save_pretrained(dir) (safetensors, the default) and tokenizer.save_pretrained(dir)"


class ModelFolderError(ValueError):
    """A model folder that cannot be loaded; the message says what to do instead."""


def check_model_dir(path):
    if not os.path.isdir(path):
        raise ModelFolderError(f"{path} is not a folder: pass the folder that {SAVE_HINT} wrote")
    names = sorted(os.listdir(path))
    if "adapter_config.json" in names:
        raise ModelFolderError(
            f"{path} holds a LoRA adapter (adapter_config.json), not a full model: merge it first with "
            "model = model.merge_and_unload(), then " + SAVE_HINT
        )
    pickles = [n for n in names if n.endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise ModelFolderError(
            f"{path} holds pickled weights ({', '.join(pickles)}), which are never loaded (unpickling runs code): "
            f"delete them and {SAVE_HINT}"
        )
    if "config.json" not in names:
        raise ModelFolderError(f"{path} has no config.json: {SAVE_HINT}")
    if not any(n.endswith(".safetensors") for n in names):
        raise ModelFolderError(f"{path} has no *.safetensors weights: {SAVE_HINT}")
    with open(os.path.join(path, "config.json")) as f:
        try:
            config = json.load(f)
        except ValueError as e:
            raise ModelFolderError(f"{path}/config.json is not valid JSON ({e}): {SAVE_HINT}") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ModelFolderError(f"{path}/config.json names no model_type: {SAVE_HINT}")
    if "auto_map" in config:
        raise ModelFolderError(
            f"{path}/config.json has an auto_map (the model needs its own Python code), and trust_remote_code is "
            "never enabled: use an architecture that transformers ships (Qwen2, Llama, ...)"
        )
