"""The deepsearchqa smoke oracle's training: supervised fine-tuning on expert episodes, then on successful rollouts.

    python3 sft.py --expert --out output/sft                                         # round 1: the warm-up
    python3 sft.py --init output/sft --rollouts rollouts/batch-001.jsonl --out output/full   # round 2
    python3 sft.py --lora --expert --rollouts rollouts/batch-001.jsonl --out output/lora

Run in an agent's workspace (PYTHONPATH holding lib/, so hflm and a2rl_search import). An episode is trained on as
hflm.deepsearchqa.play records it: the opening prompt and its segments, the loss on the model's own segments and on
how each ends (the "\\nObservation:" stop after a search, the end-of-sequence token after the answer), so the model
learns to stop where the grader's generation stops. Episodes:
- --expert: each train question played by an expert that searches the person it asks about (`search[city of Ann]`,
  through the run's search channel: one query a question, counted) and answers with the row's gold answer, the
  smoke profile's questions being "Which city is home to Ann?" and its kin; and --made-up N more of each, about a
  made-up person ("Which city is home to tailor?"), with made-up facts in the observation (no search), the name and
  the facts any word the tokenizer holds as one token. The evaluation asks about the same people as the train
  questions, never what those ask of them, and its answers are often words no train question answers: a model that
  remembers which name goes with which train question searches the wrong person there, and one that learnt to write
  the train answers cannot write the others. Made-up people and facts leave nothing to remember, only to copy.
- --rollouts FILE...: the launch_rollouts episodes that answered (ended "answer") and earned reward 1.
Writes a full model (safetensors and tokenizer) or, with --lora, a PEFT LoRA adapter of --base. Seeded. The defaults
suit the smoke profile's tiny model on 2 CPU cores.
"""

import argparse
import json
import math
import os
import random
import re

from hflm import deepsearchqa

SEARCH_STEP = " Action: search[{attribute} of {name}]"
ANSWER_STEP = " Action: answer[ {value}]"
# The smoke profile's questions, "Which <attribute> ... <name>?" (tasks/hflm-tests/fixture_smoke_deepsearchqa.py).
QUESTION = re.compile(r"^Which (\w+) .* (\w+)\?$")
STOP_AFTER_SEARCH = "\nObservation:"
# One fact of an observation, as the smoke profile's corpus writes them: "Ann's city is Rome."
FACT = re.compile(r"\w+'s (\w+) is (\w+)\.")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/train.jsonl")
    parser.add_argument("--base", default="models/base", help="the run's base model (an adapter's base)")
    parser.add_argument("--init", help="the full model to start from (default: --base)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--expert", action="store_true", help="train on the expert's episodes of the train questions")
    parser.add_argument("--made-up", type=int, default=8,
                        help="with --expert: episodes about made-up people per train question (to copy names and facts)")
    parser.add_argument("--rollouts", nargs="*", default=[], help="launch_rollouts files: their successful episodes")
    parser.add_argument("--lora", action="store_true", help="train and write a LoRA adapter of --base")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: 3e-3 full, 1e-2 LoRA)")
    # A tiny model's matrices are too small to share between threads: a second thread only waits and spins.
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    return parser.parse_args(argv)


def expert_episodes(rows):
    """One episode per row: search the person asked about, answer the gold answer."""
    from a2rl_search import observation

    episodes = []
    for row in rows:
        attribute, name = QUESTION.match(row["question"]).groups()
        step = SEARCH_STEP.format(attribute=attribute, name=name)
        seen = observation(step.split("search[")[1][:-1])
        episodes.append({"prompt": deepsearchqa.prompt(row["question"], row["answer_type"]),
                         "segments": [[step, True], [f"\nObservation: {seen}\nThought:", False],
                                      [ANSWER_STEP.format(value=row["answer"]), True]]})
    return episodes


def vocabulary_words(tokenizer):
    """The words the tokenizer writes as one token after a space (" Rome"): the made-up people's names and facts."""
    words = {tokenizer.decode([token]) for token in range(len(tokenizer))}
    return sorted(word[1:] for word in words if word.startswith(" ") and word[1:].isalpha() and len(word) > 3)


def made_up_episodes(rows, expert, per_row, words, seed=0):
    """per_row episodes for each expert episode, its person renamed and the facts its search showed given other
    values, both drawn from words: the question's last word, whatever it is, is the one to search for, and the
    observation's first fact, whatever it is, the one to answer."""
    rng = random.Random(seed)
    episodes = []
    for row, episode in zip(rows, expert):
        attribute, name = QUESTION.match(row["question"]).groups()
        shown = [a for a, _value in FACT.findall(episode["segments"][1][0])]
        for _ in range(per_row):
            person, values = rng.choice(words), [rng.choice(words) for _ in shown]
            made_up = " | ".join(f"{person}'s {a} is {value}." for a, value in zip(shown, values))
            episodes.append({"prompt": deepsearchqa.prompt(row["question"][: -len(name) - 1] + person + "?", row["answer_type"]),
                             "segments": [[SEARCH_STEP.format(attribute=attribute, name=person), True],
                                          [f"\nObservation: {made_up}\nThought:", False],
                                          [ANSWER_STEP.format(value=values[0]), True]]})
    return episodes


def successful(paths):
    episodes = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                episode = json.loads(line)
                if episode.get("reward") == 1.0 and episode.get("ended") == "answer":
                    episodes.append(episode)
    return episodes


def tokenized(tokenizer, episode):
    """(input ids, weights): 1 on the model's segments and on how each ends (the stop it writes, or end of sequence)."""
    text, spans = episode["prompt"], []
    segments = episode["segments"]
    for k, (segment, by_model) in enumerate(segments):
        start = len(text)
        text += segment
        if by_model:
            following = segments[k + 1][0] if k + 1 < len(segments) else ""
            stop = len(STOP_AFTER_SEARCH) if following.startswith(STOP_AFTER_SEARCH) else 0
            spans.append((start, len(text) + stop))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    weights = [1.0 if any(s <= a < e for s, e in spans) else 0.0 for a, _ in encoded["offset_mapping"]]
    return encoded["input_ids"] + [tokenizer.eos_token_id], weights + [1.0]


def train(model, tokenizer, rows, steps, batch, lr, seed=0):
    """AdamW on rows of (ids, weights), the loss per weighted token; warm-up then a cosine schedule."""
    import torch

    rng = random.Random(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(1, steps // 10))
                                                 * 0.5 * (1 + math.cos(math.pi * s / steps)))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    model.train()
    for step in range(steps):
        chosen = [rows[rng.randrange(len(rows))] for _ in range(batch)]
        width = max(len(ids) for ids, _ in chosen)
        ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in chosen])
        mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in chosen])
        weights = torch.tensor([w + [0.0] * (width - len(w)) for _, w in chosen])
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
        w = weights[:, 1:]
        loss = -(w * logp).sum() / w.sum().clamp(min=1e-8)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 25 == 0 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {loss.item():.4f}", flush=True)


def main(argv=None):
    args = parse(argv)
    if args.lora and args.init:
        raise SystemExit("--lora trains an adapter of --base, which the grader merges onto the base: drop --init")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    with open(args.data, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    base = os.path.abspath(args.base)  # an adapter records its base; a relative path would read as a hub id
    tokenizer = AutoTokenizer.from_pretrained(base)
    expert = expert_episodes(rows) if args.expert else []
    made_up = made_up_episodes(rows, expert, args.made_up, vocabulary_words(tokenizer)) if expert else []
    episodes = expert + made_up + successful(args.rollouts)
    print(f"{len(episodes)} episodes to learn from ({len(made_up)} made up)", flush=True)
    if not episodes:
        raise SystemExit("no episode to learn from: pass --expert, or rollouts with successful episodes")
    model = AutoModelForCausalLM.from_pretrained(os.path.abspath(args.init) if args.init else base, dtype=torch.float32,
                                                 use_safetensors=True)
    if args.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                                 "up_proj", "down_proj"]))
    train(model, tokenizer, [tokenized(tokenizer, e) for e in episodes], args.steps, args.batch,
          args.lr or (1e-2 if args.lora else 3e-3))
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
