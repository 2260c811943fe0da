"""hflm: the full tier's shared Python package, for real Hugging Face models (tier `full`, issue 17).

    from hflm import gsm8k, humaneval, inference, tiny

- inference   generate(model_dir, prompts, GenerationParams) -> texts; transformers or vLLM backend
- gpu         the GPUs a process was given, counted without a CUDA context; why they cannot be used; the probe
- model_dir   check_model_dir: what a loadable model folder is (safetensors, no pickles, no remote code)
- submission  inspect / materialise: a submitted full model or LoRA adapter, checked against the base, made
              into the full model folder that grading loads (adapters merged); `python -m hflm.submission`
- tiny        build(out_dir, texts, seed): a tiny random Qwen2 model and BPE tokenizer, for tests and CI
- reasoning   strip_reasoning: <think>…</think> removed, as the reference does before any extraction
- gsm8k       the reference's 4-shot chat prompt, answer extraction and scoring (OpenCompass gsm8k_gen_1d7fe4)
- humaneval   the reference's prompt, code extraction, program assembly and 3 s execution
- grading     what every full-tier grader entry shares: the server's arguments, one CPU thread, the submission opened
- assets      prepare / verify: a task's splits and base model under $A2RL_HOME with sha256 manifests,
              from the hub or a snapshot folder; `python -m hflm.assets` (what `a2rl prepare` runs)

Runs in .venv-full (tasks/hflm/requirements.txt, built by scripts/setup.sh). Importing a module loads
torch and transformers only when a function needs them, so graders can read completions without them.
"""

import os

# Before anything loads torch: torch.cuda.is_available() and device_count() then ask NVML instead of initialising
# CUDA, which would make vLLM's forked engine workers fail ("Cannot re-initialize CUDA in forked subprocess").
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
