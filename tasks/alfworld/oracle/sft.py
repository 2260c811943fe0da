"""The alfworld oracle's warm-up: supervised fine-tuning on the expert's episodes of the visible train games.

    python3 sft.py --data data --base models/base --out output/sft [--lora] [--steps N] [--games N]
    python3 sft.py --base output/sft --rollouts rollouts/batch-001.jsonl --steps 60 --lr 1e-3 --out output/full

Run in an agent's workspace (PYTHONPATH holding lib/, so hflm and alfworld import). The train split's env gives the
handcoded expert's next command in infos["extra.expert_plan"] (upstream's AlfredTWEnv does so on the train split
under DAgger's settings), so each train game is played by the expert through the same env and the same ReAct
transcript the grader builds (hflm.alfworld: the reference's two examples, the opening, " action\\nfeedback\\n>" per
step). The model is trained on the whole transcript with the loss on the actions' tokens and the newline ending
each (where the grader's generation stops). With --rollouts (expert iteration, the second line above), the won
episodes of launch_rollouts batches join them: the policy's own successes on the train games, as more demonstrations
(--games 0: those alone). Writes a full model (safetensors and tokenizer) or, with --lora, a PEFT
LoRA adapter. Seeded. The defaults suit the smoke profile's tiny model on 2 CPU cores; a real base model wants a
lower learning rate, LoRA and a GPU.
"""

import argparse
import json
import os
import random

from hflm import alfworld


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data", help="the visible data folder (alfworld/, react_prompts.json)")
    parser.add_argument("--base", default="models/base", help="the model to start from")
    parser.add_argument("--out", required=True, help="where to write the model (or, with --lora, the adapter)")
    parser.add_argument("--lora", action="store_true", help="train and write a LoRA adapter instead of the full model")
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps of --batch transcripts")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--games", type=int, default=300, help="train games the expert plays (the first N of the env's order; 0: none)")
    parser.add_argument("--rollouts", nargs="*", default=[], help="launch_rollouts batch files whose won episodes to train on too")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: 3e-3 full, 1e-2 LoRA)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's, one per CPU); a tiny model trains faster per CPU-second on one")
    return parser.parse_args(argv)


def expert_episodes(data, n_games):
    """The expert's episodes on n_games train games, as hflm.alfworld.play records episodes."""
    env, n = alfworld.open_games(os.path.join(data, "alfworld"), "train", limit=n_games)
    with open(os.path.join(data, "react_prompts.json")) as f:
        prompts = json.load(f)
    obs, infos = env.reset()
    episodes = []
    for i in range(n):
        key = alfworld.prompt_key(alfworld.game_name(infos["extra.gamefile"][i]))
        episodes.append({"prompt": alfworld.react_prompt(prompts, key) + alfworld.initial_observation(obs[i]) + "\n>",
                         "actions": [], "observations": [], "won": False})
    running = list(range(n))
    for _ in range(alfworld.MAX_STEPS):
        if not running:
            break
        commands = [plan[0] if plan else "look" for plan in infos["extra.expert_plan"]]
        obs, _, dones, infos = env.step(commands)
        still = []
        for i in running:
            episodes[i]["actions"].append(commands[i])
            episodes[i]["observations"].append(alfworld.process_ob(obs[i]))
            episodes[i]["won"] = bool(infos["won"][i])
            if not dones[i]:
                still.append(i)
        running = still
    env.close()
    return [e for e in episodes if e["won"]]


def won_episodes(paths):
    """The won episodes of launch_rollouts batch files (one JSON line per episode, as hflm.alfworld.play records them)."""
    episodes = []
    for path in paths:
        with open(path) as f:
            episodes += [e for e in map(json.loads, f) if e["won"]]
    return episodes


def tokenized(tokenizer, episode, weight=1.0):
    """(input ids, per-token loss weights): `weight` on each action and its newline, 0 elsewhere."""
    text, spans = episode["prompt"], []
    for action, observation in zip(episode["actions"], episode["observations"]):
        start = len(text)  # the space too: the action's first token holds it
        text += f" {action}\n"
        spans.append((start, len(text)))
        text += f"{observation}\n>"
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    weights = [weight if any(s <= a < e for s, e in spans) else 0.0 for a, _ in encoded["offset_mapping"]]
    return encoded["input_ids"], weights


def train(model, tokenizer, rows, steps, batch, lr, seed=0, log_every=10):
    """AdamW on rows of (ids, weights): loss = -sum(weight * log p(token)) / sum(|weight|) per batch; cosine schedule."""
    import math

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
        loss = -(w * logp).sum() / w.abs().sum().clamp(min=1e-8)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {loss.item():.4f}", flush=True)


def load(base, lora):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    base = os.path.abspath(base)  # an adapter records its base; hflm.submission reads a relative path as a hub id
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_safetensors=True)
    if lora:
        from peft import LoraConfig, get_peft_model

        # The output layer too: the smoke base learnt its one answer there, which adapted layers below it barely move.
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                                 "up_proj", "down_proj", "lm_head"]))
    return model, tokenizer


def save(model, tokenizer, out, lora):
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def main(argv=None):
    args = parse(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    episodes = expert_episodes(args.data, args.games) if args.games > 0 else []
    print(f"{len(episodes)} expert episodes, {sum(len(e['actions']) for e in episodes)} steps", flush=True)
    if args.rollouts:
        won = won_episodes(args.rollouts)
        print(f"{len(won)} won rollout episodes, {sum(len(e['actions']) for e in won)} steps", flush=True)
        episodes += won
    if not episodes:
        raise SystemExit("nothing to train on: no expert games (--games 0) and no won rollout episodes; sample more rollouts or raise --games")
    model, tokenizer = load(args.base, args.lora)
    rows = [tokenized(tokenizer, e) for e in episodes]
    train(model, tokenizer, rows, args.steps, args.batch, args.lr or (1e-2 if args.lora else 3e-3))
    save(model, tokenizer, args.out, args.lora)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
