"""Batched text generation from a Hugging Face model folder, with the reference harness's semantics.

    from hflm.inference import generate, GenerationParams
    texts = generate(model_dir, [[{"role": "user", "content": "Hi"}], "Plain prompt"], GenerationParams(max_new_tokens=64))

Returns len(prompts) * n texts, prompt-major (the n samples of prompt i are texts[i*n:(i+1)*n]), as
transformers' num_return_sequences lays them out; with n = 1, one text per prompt, in order.

The semantics are those of the reference (OpenCompass's VLLMwithChatTemplate on vLLM):
- A prompt is a chat message list, or a string. With chat_template (the default) a string is one user
  message, the tokenizer's chat template is applied with the generation prompt, and the rendered text
  is tokenized without adding special tokens (the template writes them). Without chat_template only
  strings are accepted, tokenized as vLLM tokenizes a text prompt (special tokens added).
- temperature 0 is greedy; otherwise sampling from softmax(logits / temperature) within top_p.
  Nothing else shapes the distribution: no top-k, no repetition penalty, whatever the model's
  generation_config.json suggests (vLLM with explicit SamplingParams ignores it too).
- Generation ends at max_new_tokens, at an end-of-sequence token (the tokenizer's and those of
  generation_config.json), or at a stop string. The text is decoded without special tokens and cut
  before the first occurrence of any stop string, which is not kept.

Backends (BACKENDS), picked by default_backend():
- vllm when a GPU can be used here and vLLM is installed; transformers on CUDA when a GPU can be used without
  vLLM; transformers on CPU when none can and none was requested. When the server gave the process GPUs
  (A2RL_REQUIRE_GPU=1) and they cannot be used, or vLLM is installed but does not load, it raises
  hflm.gpu.GpuUnavailable with the reason: never a silent fallback to CPU, where a full grading cannot finish.
- transformers: batches of prompts of similar length, left-padded; CUDA (bfloat16 where the GPU has it, else
  float16) or CPU (float32; set torch.set_num_threads yourself, as with microlm). The last folder loaded stays
  loaded while its files are unchanged (an interactive task generates once per step).
- vllm: vLLM's documented LLM / SamplingParams API, one engine per call (so a caller with several prompt sets
  passes them together), shut down before returning; dtype from the GPUs' compute capability (hflm.gpu.dtype_for);
  tensor parallel over the largest power of 2 of the visible GPUs that divides the model's attention heads.
  Written against vLLM's source; CI checks its calls against a stand-in module only, since no GPU is there:
  bench/gpu-check.sh runs it on a GPU host.
"""

import dataclasses
import functools
import json
import os

from . import gpu
from .model_dir import check_model_dir


@dataclasses.dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 512
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    stop: tuple = ()  # stop strings; the text is cut before the first one
    n: int = 1  # samples per prompt
    seed: int = 0  # seeds sampling; greedy ignores it
    chat_template: bool = True

    def __post_init__(self):
        if not (isinstance(self.max_new_tokens, int) and self.max_new_tokens >= 1):
            raise ValueError(f"max_new_tokens must be an integer >= 1, not {self.max_new_tokens!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 is greedy), not {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p!r}")
        if not (isinstance(self.n, int) and self.n >= 1):
            raise ValueError(f"n must be an integer >= 1, not {self.n!r}")
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise ValueError(f"stop must be a list of non-empty strings, not {self.stop!r}")
        object.__setattr__(self, "stop", tuple(self.stop))


def generate(model_dir, prompts, params=None, backend=None, batch_size=16):
    """Complete every prompt (see the module docstring). backend: a name in BACKENDS, or None to pick one;
    batch_size: prompts per forward pass in the transformers backend (vLLM schedules its own)."""
    params = params or GenerationParams()
    check_model_dir(model_dir)
    prompts = list(prompts)
    for i, p in enumerate(prompts):
        if isinstance(p, str):
            continue
        if not (isinstance(p, list) and p and all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in p)):
            raise ValueError(f"prompt {i} must be a string or a non-empty list of {{'role', 'content'}} messages, not {p!r}")
        if not params.chat_template:
            raise ValueError(f"prompt {i} is a chat message list, which needs chat_template=True; or pass a string")
    if not prompts:
        return []
    name = backend or default_backend()
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}: use one of {sorted(BACKENDS)}")
    return BACKENDS[name](model_dir, prompts, params, batch_size)


def default_backend():
    """vllm, or transformers on CUDA or CPU, as the module docstring says; raises gpu.GpuUnavailable with the reason
    when GPUs were requested and cannot be used, or when vLLM is installed and broken. Loads no CUDA context."""
    reason = gpu.unusable_reason()
    if reason:
        if gpu.requested():
            raise gpu.GpuUnavailable(f"this job was given GPUs but cannot use them, and will not fall back to CPU: {reason}")
        return "transformers"
    return "transformers" if gpu.load_vllm() is None else "vllm"


def tensor_parallel_size(gpus, heads=None, kv_heads=None):
    """The largest power of 2 that is <= gpus (1 without GPUs), as the reference sizes vLLM's tensor parallelism,
    lowered until it divides the model's attention heads (and its key/value heads divide it or it them), which vLLM
    requires: Qwen2.5-1.5B's 12 heads take 4 of 8 GPUs, not 8."""
    size = 1
    while size * 2 <= gpus:
        size *= 2
    while size > 1 and heads is not None and (heads % size or (kv_heads and kv_heads % size and size % kv_heads)):
        size //= 2
    return size


def attention_heads(model_dir):
    """(num_attention_heads, num_key_value_heads) from the model's config.json; either is None when it is absent."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config = config.get("text_config", config)  # multimodal configs keep the language model's in text_config
    heads = config.get("num_attention_heads")
    return heads, config.get("num_key_value_heads", heads)


def cut_at_stop(text, stop):
    """text up to the first occurrence of any stop string (excluded)."""
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=len(text))
    return text[:cut]


def prompt_token_ids(tokenizer, prompts, chat_template):
    """Each prompt as token ids, rendered as the reference renders it (see the module docstring)."""
    if not chat_template:
        return [tokenizer(p)["input_ids"] for p in prompts]
    if not tokenizer.chat_template:
        raise ValueError(
            "the model's tokenizer has no chat template: save one with the tokenizer (tokenizer.chat_template = ...; "
            "tokenizer.save_pretrained(dir)), or pass strings with chat_template=False"
        )
    ids = []
    for p in prompts:
        messages = [{"role": "user", "content": p}] if isinstance(p, str) else p
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids.append(tokenizer.encode(text, add_special_tokens=False))
    return ids


def end_token_ids(tokenizer, model_dir):
    """The tokenizer's EOS and generation_config.json's eos_token_id(s): generation ends at any of them."""
    from transformers import GenerationConfig

    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    try:
        eos = GenerationConfig.from_pretrained(model_dir).eos_token_id
    except OSError:  # no generation_config.json
        eos = None
    ids.update([eos] if isinstance(eos, int) else eos or [])
    if not ids:
        raise ValueError(f"{model_dir}: neither the tokenizer nor generation_config.json names an end-of-sequence token")
    return sorted(ids)


def _transformers_backend(model_dir, prompts, params, batch_size):
    import torch
    from transformers import GenerationConfig

    cuda = gpu.unusable_reason() is None
    device = "cuda" if cuda else "cpu"
    dtype = getattr(torch, gpu.dtype_for(gpu.capabilities())) if cuda else torch.float32
    tokenizer, model = _loaded(model_dir, _weights_stamp(model_dir), device, dtype)
    eos = end_token_ids(tokenizer, model_dir)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    # transformers fills every setting left unset from the model's generation_config.json (a
    # repetition penalty, top-k, ...): start from a blank one and set each setting that matters.
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad)
    sampled = params.temperature > 0
    sampling = dict(temperature=params.temperature, top_p=params.top_p, top_k=0, typical_p=1.0) if sampled else {}
    per_prompt = params.n if sampled else 1  # greedy: one decode, copied n times (transformers refuses n > 1)
    config = GenerationConfig(
        max_new_tokens=params.max_new_tokens, min_new_tokens=0, do_sample=sampled, num_beams=1,
        repetition_penalty=1.0, no_repeat_ngram_size=0, num_return_sequences=per_prompt,
        eos_token_id=eos, pad_token_id=pad, stop_strings=list(params.stop) or None, **sampling,
    )
    encoded = prompt_token_ids(tokenizer, prompts, params.chat_template)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths together: less padding
    texts = [None] * len(encoded)
    if sampled:
        torch.manual_seed(params.seed)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(encoded[i]) for i in chunk)
            # Left padding puts every prompt's last token in the last column, where generation continues.
            ids = torch.tensor([[pad] * (width - len(encoded[i])) + encoded[i] for i in chunk], device=device)
            mask = torch.tensor([[0] * (width - len(encoded[i])) + [1] * len(encoded[i]) for i in chunk], device=device)
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config, tokenizer=tokenizer)
            completions = [_until_end(row, eos) for row in out[:, width:].tolist()]
            decoded = tokenizer.batch_decode(completions, skip_special_tokens=True)
            for k, i in enumerate(chunk):
                samples = [cut_at_stop(t, params.stop) for t in decoded[k * per_prompt : (k + 1) * per_prompt]]
                texts[i] = samples * (params.n // per_prompt)
    return [text for samples in texts for text in samples]


@functools.lru_cache(maxsize=1)
def _loaded(model_dir, stamp, device, dtype):
    """The tokenizer and model of a folder, loaded once per process while its files stay the same (`stamp`): an
    interactive task (hflm.alfworld) calls generate once per step of its episodes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, use_safetensors=True, trust_remote_code=False)
    return tokenizer, model.to(device).eval()


def _weights_stamp(model_dir):
    """Names, sizes and modification times of the folder's files: a model saved again over it is loaded again."""
    return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(model_dir) if e.is_file()))


def _until_end(token_ids, eos):
    """The generated ids before the first end-of-sequence id (what follows it is padding)."""
    ends = [token_ids.index(e) for e in eos if e in token_ids]
    return token_ids[: min(ends)] if ends else token_ids


def _vllm_backend(model_dir, prompts, params, batch_size):
    # Untested here (no GPU in CI): vLLM's API, LLM(...).generate(TokensPrompt list, SamplingParams).
    import torch
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
    encoded = prompt_token_ids(tokenizer, prompts, params.chat_template)
    heads, kv_heads = attention_heads(model_dir)
    llm = LLM(model=model_dir, tensor_parallel_size=tensor_parallel_size(torch.cuda.device_count(), heads, kv_heads),
              dtype=gpu.dtype_for(gpu.capabilities()), trust_remote_code=False, seed=params.seed)
    try:
        sampled = params.temperature > 0
        per_prompt = params.n if sampled else 1  # greedy: one decode, copied n times, as the transformers backend does
        sampling = SamplingParams(
            n=per_prompt, temperature=params.temperature, top_p=params.top_p if sampled else 1.0,
            max_tokens=params.max_new_tokens, stop=list(params.stop), stop_token_ids=end_token_ids(tokenizer, model_dir),
            seed=params.seed, skip_special_tokens=True,
        )
        outputs = llm.generate([{"prompt_token_ids": ids} for ids in encoded], sampling)
    finally:
        # The engine's worker processes hold the GPU's memory until they are stopped; a second engine in the same
        # process beside a live one is a known source of out-of-memory failures.
        llm.llm_engine.engine_core.shutdown()
    # vLLM already cuts at stop strings and excludes them; cut_at_stop keeps both backends identical.
    return [cut_at_stop(o.text, params.stop) for request in outputs for o in request.outputs for _ in range(params.n // per_prompt)]


BACKENDS = {"transformers": _transformers_backend, "vllm": _vllm_backend}
