"""The webshop oracle: supervised fine-tuning on expert episodes of the visible train goals, and on won rollouts.

    python3 sft.py --out output/sft [--base models/base] [--goals N] [--lora]
    python3 sft.py --base output/sft --goals 100 --rollouts rollouts/batch-001.jsonl --out output/full   # second round

Run in an agent's workspace (PYTHONPATH holding lib/, so hflm and web_agent_site import). The expert plays train goals
in the env over data/webshop (hflm.webshop.open_server, the goals of data/train.jsonl), as WebShop's own imitation
baseline searches (baseline_models/env.py's `f'{att} {query}'`: the goal's first attribute and its product query),
then clicks the first result and buys it: an episode of three steps whose reward is the env's. Its episodes are
recorded as hflm.webshop.play records them, and each step becomes one training row: the grader's chat for that step
(hflm.webshop.step_messages, rendered by the model's chat template with the generation prompt) and the action with the
newline that ends it, the loss on the action only. With --rollouts, the won episodes of launch_rollouts batches join
them (expert iteration: the policy's own successes as demonstrations). Rows keep the last --context tokens of the
chat: the smoke model's attention windows reach no further. Writes a full model (safetensors and tokenizer) or, with
--lora, a PEFT LoRA adapter. Seeded. The defaults suit the smoke profile's tiny model on 2 CPU cores; a real base
model wants whole chats, a lower learning rate, LoRA and a GPU.
"""

import argparse
import json
import os
import random

from hflm import webshop


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data", help="the visible data folder (webshop/, train.jsonl)")
    parser.add_argument("--task", default="webshop", choices=sorted(webshop.VARIANTS))
    parser.add_argument("--base", default="models/base", help="the model to start from")
    parser.add_argument("--out", required=True, help="where to write the model (or, with --lora, the adapter)")
    parser.add_argument("--lora", action="store_true", help="train and write a LoRA adapter instead of the full model")
    parser.add_argument("--goals", type=int, default=400, help="train goals the expert plays (a seeded sample; 0: none)")
    parser.add_argument("--rollouts", nargs="*", default=[], help="launch_rollouts batch files whose won episodes to train on too")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps of --batch rows")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: 3e-3 full, 1e-2 LoRA)")
    parser.add_argument("--context", type=int, default=192, help="chat tokens kept before each action")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default 1, see main)")
    args = parser.parse_args(argv)
    if args.goals < 0 or args.steps < 1 or args.batch < 1 or args.context < 1 or args.threads < 1:
        parser.error("--goals must be >= 0; --steps, --batch, --context and --threads >= 1")
    return args


def expert_episodes(data, task, n_goals, seed=0):
    """The expert's episodes on a seeded sample of n_goals train goals."""
    variant = webshop.VARIANTS[task]
    env = webshop.open_server(os.path.join(data, "webshop"), variant)
    with open(os.path.join(data, "train.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    goals = [r["goal_index"] for r in random.Random(seed).sample(rows, min(n_goals, len(rows)))]
    sessions = webshop.sessions(env, len(goals))
    episodes = []
    for session, index in zip(sessions, goals):
        observation, _ = session.reset(session=index)
        goal = env.server.goals[index]
        episode = {"goal_index": index, "instruction": session.get_instruction_text(), "observations": [observation],
                   "available_actions": [], "actions": [], "reward": 0.0, "won": False}
        for step in range(3):
            available = session.get_available_actions()
            episode["available_actions"].append(webshop.format_available_actions(available))
            if step == 0:
                action = f"search[{goal['attributes'][0]} {goal['query']}]"
            elif step == 1:
                action = f"click[{available['clickables'][2]}]"  # after "back to search" and "next >"
            else:
                action = "click[buy now]"
            observation, reward, done, _ = session.step(action)
            episode["actions"].append(action)
            episode["observations"].append(observation)
        episode.update(reward=float(reward), won=bool(done and reward >= variant.success))
        episodes.append(episode)
    return [e for e in episodes if e["won"]]


def won_episodes(paths):
    """The won episodes of launch_rollouts batch files (one JSON line per episode, as hflm.webshop.play records them)."""
    episodes = []
    for path in paths:
        with open(path) as f:
            episodes += [e for e in map(json.loads, f) if e["won"]]
    return episodes


def rows_of(tokenizer, episodes, context):
    """(input ids, labels) per step: the step's chat (its last `context` tokens), then the action and its newline."""
    rows = []
    for episode in episodes:
        for t, action in enumerate(episode["actions"]):
            chat = tokenizer.apply_chat_template(webshop.step_messages(episode, t), tokenize=False, add_generation_prompt=True)
            ids = tokenizer(chat, add_special_tokens=False)["input_ids"][-context:]
            target = tokenizer(action + "\n", add_special_tokens=False)["input_ids"]
            rows.append((ids + target, [-100] * len(ids) + target))
    return rows


def train(model, tokenizer, rows, steps, batch, lr, seed=0, log_every=20):
    """AdamW on random batches of rows, loss on the labelled tokens, linear warm-up then cosine decay."""
    import math

    import torch

    rng = random.Random(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(1, steps // 10))
                                                 * 0.5 * (1 + math.cos(math.pi * s / steps)))
    pad = tokenizer.pad_token_id
    model.train()
    for step in range(steps):
        chosen = [rows[rng.randrange(len(rows))] for _ in range(batch)]
        width = max(len(ids) for ids, _ in chosen)
        ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in chosen])
        mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in chosen])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in chosen])
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {loss.item():.4f}", flush=True)


def main(argv=None):
    args = parse(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # One thread by default, whatever OMP_NUM_THREADS the job has: two OpenMP threads spin against anything else on
    # the cores (the baseline's grading, another job) and stall; one also gives the same model on any core count.
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = os.path.abspath(args.base)  # an adapter records its base; hflm.submission reads a relative path as a hub id
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_safetensors=True)
    if args.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                                 "up_proj", "down_proj"]))
    expert = expert_episodes(args.data, args.task, args.goals) if args.goals else []
    won = won_episodes(args.rollouts)
    print(f"{len(expert)} expert episodes, {len(won)} won rollout episodes", flush=True)
    rows = rows_of(tokenizer, expert + won, args.context)
    if not rows:
        raise SystemExit("no episode to train on: give --goals or --rollouts batches holding won episodes")
    train(model, tokenizer, rows, args.steps, args.batch, args.lr or (1e-2 if args.lora else 3e-3))
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"wrote {'an adapter' if args.lora else 'a full model'} to {args.out}", flush=True)


if __name__ == "__main__":
    main()
