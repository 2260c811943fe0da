"""bench/gpu-check.sh's training job: a LoRA adapter of the run's base model, trained a few steps on the GPU.

    python3 code/gpu_check_train.py --out output/gpu-check     # in a run_training job with gpus: 1

Not a recipe: it proves that a sandboxed job holding a GPU loads the base model onto CUDA, runs forward and backward
passes there and saves an adapter the grader merges. It stops at the first failure with the reason.
"""

import argparse
import json
import os
import sys

import hflm  # noqa: F401  (first: it makes torch probe CUDA through NVML)
from hflm import gpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    reason = gpu.unusable_reason()
    if reason:
        sys.exit(f"gpu-check training: no usable GPU: {reason}")

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = getattr(torch, gpu.dtype_for(gpu.capabilities()))
    tokenizer = AutoTokenizer.from_pretrained("models/base")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained("models/base", dtype=dtype).to("cuda")
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with open("data/train.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line, _ in zip(f, range(args.steps * 4))]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    model.train()
    for step in range(args.steps):
        batch = [r["question"] + "\n" + r["answer"] for r in rows[step * 4 : step * 4 + 4]] or ["x"]
        encoded = tokenizer(batch, return_tensors="pt", padding=True, truncation=True, max_length=256).to("cuda")
        loss = model(**encoded, labels=encoded["input_ids"]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step + 1}/{args.steps}: loss {loss.item():.4f} on {torch.cuda.get_device_name(0)} ({dtype})", flush=True)
    model.save_pretrained(args.out)
    print(f"saved a LoRA adapter to {args.out}; peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
