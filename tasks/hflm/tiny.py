"""A tiny Qwen2 model with a BPE tokenizer trained on given text: the full tier's stand-in for tests and CI.

    from hflm.tiny import build
    build(out_dir, texts, seed=0)     # writes config.json, model.safetensors, tokenizer files, chat template

No model hub is reachable from CI, so the full tier's smoke profile builds its base model here: the
Qwen2 architecture (what the reference's Qwen2.5 models are) with random weights, about 270k
parameters by default, and a byte-level BPE tokenizer trained on `texts` with Qwen2's pre-tokenizer and special
tokens, so that AutoTokenizer (which rebuilds a qwen2 model's tokenizer as Qwen2Tokenizer) encodes
exactly as trained. The chat template is ChatML, as Qwen2.5-Instruct's (without its default system
message). Saved with save_pretrained: safetensors weights, loadable by hflm.inference and by TRL.
The same texts and seed give the same files, byte for byte.
"""

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen2's pre-tokenizer split (transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX).
QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def train_tokenizer(texts, vocab_size=512):
    """A byte-level BPE tokenizer as Qwen2Tokenizer builds one: NFC, Qwen2's split, byte-level bytes."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer)
    return tokenizer


def build(out_dir, texts, seed=0, vocab_size=512, hidden_size=96, layers=2, sliding_window=None):
    """Write a tiny random Qwen2 model and its tokenizer to out_dir; returns out_dir.

    sliding_window: when given, every layer attends to the last sliding_window tokens only (Qwen2's
    use_sliding_window). A random model's attention is spread over the whole prompt, so what one word
    of a 1.4k-token prompt contributes is too faint to learn from within minutes; a window keeps it near.
    """
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a non-empty list of strings (the tokenizer is trained on them)")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(texts, vocab_size), eos_token=IM_END, pad_token=PAD, unk_token=PAD,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    # Only set when asked, so that models built without a window keep their exact config.json.
    window = dict(use_sliding_window=True, sliding_window=sliding_window, max_window_layers=0) if sliding_window else {}
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 8 // 3,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **window,
    )
    with torch.random.fork_rng(devices=[]):  # seeded init without touching the caller's random state
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def fit(model_dir, rows, steps, batch_size, seed=0, lr=3e-3, trainable=None):
    """Trains the model in model_dir, in place, on token rows (input_ids, labels; -100 where no loss), padded to one
    width: a few seeded AdamW steps on random batches, so that a fixture base model can answer in a fixed way.
    trainable: the names of the only parameters to train (e.g. ["lm_head.weight"]), else all of them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    pad = AutoTokenizer.from_pretrained(model_dir).pad_token_id
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for name, p in model.named_parameters():
            p.requires_grad_(trainable is None or name in trainable)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
        model.train()
        for _ in range(steps):
            batch = torch.randperm(len(rows))[:batch_size]
            loss = model(input_ids=input_ids[batch], attention_mask=attention[batch], labels=labels[batch]).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model.save_pretrained(model_dir)
