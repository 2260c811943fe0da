"""The humaneval oracle: supervised fine-tuning with TRL on the visible problems, in the grader's exact prompt.

    python3 sft.py --data data/train.jsonl --base models/base --out submission [--lora] [--steps N] [--lr LR]

Run in an agent's workspace (PYTHONPATH holding lib/, so hflm imports), for example as a run_training
job. Each row {task_id, prompt, canonical_solution, test, entry_point} becomes one prompt-completion
pair: the prompt is the grader's chat (hflm.humaneval.messages) rendered with the model's chat template
and the generation prompt, exactly what the grader feeds the model; the completion is the whole function
(the row's prompt, then its canonical_solution) in a fenced python block, which hflm.humaneval.extract_code
takes, and the end-of-sequence token, where the grader's generation stops. The whole function, because
an indented body alone fails to compile once extract_code left-strips it. TRL's SFTTrainer trains on the
completion's tokens only. Writes a full model folder (safetensors, with the tokenizer) to --out, or with
--lora a PEFT LoRA adapter folder, which the grader merges onto the base. Seeded: the same inputs give
the same model.

The defaults suit the smoke profile's tiny model on 2 CPU cores (tasks/hflm-tests/fixture_smoke_humaneval.py);
on a real base model lower --lr and train on a GPU.
"""

import argparse
import json
import os
import shutil
import tempfile

from hflm import humaneval


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/train.jsonl", help="the visible problems (openai_humaneval rows)")
    parser.add_argument("--base", default="models/base", help="the base model folder")
    parser.add_argument("--out", required=True, help="where to write the model (or, with --lora, the adapter)")
    parser.add_argument("--lora", action="store_true", help="train and write a LoRA adapter instead of the full model")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps of batch 32 (default: 240 full, 200 LoRA)")
    parser.add_argument("--lr", type=float, default=None, help="learning rate after warmup (default: 5e-3 full, 3e-3 LoRA)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default 1, see main)")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, not {args.threads}")
    return args


def pairs(data_path, tokenizer):
    """The prompt-completion rows TRL trains on, as text: the prompt already rendered by the chat template."""
    rows = []
    with open(data_path) as f:
        for line in f:
            if line.strip():
                problem = json.loads(line)
                prompt = tokenizer.apply_chat_template(humaneval.messages(problem), tokenize=False, add_generation_prompt=True)
                # SFTTrainer appends the end-of-sequence token to each completion.
                rows.append({"prompt": prompt, "completion": f"```python\n{problem['prompt']}{problem['canonical_solution']}```"})
    return rows


def main(argv=None):
    args = parse(argv)
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    # One thread by default, whatever OMP_NUM_THREADS the job has: two OpenMP threads spin against anything else on
    # the cores (the baseline's grading, another job) and stall (oracle/README.md, Threads); one also gives the same
    # model on any core count.
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # An absolute path: an adapter records where its base was loaded from, and the grader reads a relative
    # "models/base" as a hub id that is not the run's base model (adapter_base_mismatch).
    base = os.path.abspath(args.base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_safetensors=True)
    dataset = Dataset.from_list(pairs(args.data, tokenizer))
    peft_config = None
    if args.lora:
        from peft import LoraConfig

        # LoRA on every linear layer of the blocks (attention has to learn what to copy), and lm_head trained whole
        # and saved in the adapter: a random base's output head cannot put a clear maximum on the right tokens.
        peft_config = LoraConfig(r=32, lora_alpha=64, lora_dropout=0.0, task_type="CAUSAL_LM", target_modules=[
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], modules_to_save=["lm_head"])
    steps = args.steps or (200 if args.lora else 240)
    scratch = tempfile.mkdtemp(prefix="sft-")  # the Trainer's own folder; nothing is kept there (save_strategy "no")
    config = SFTConfig(
        output_dir=scratch,
        max_steps=steps,
        # Batch 32 and a constant rate: with batch 8, or a cosine decay over fewer steps, the tiny model often stalls
        # copying the entry point's name after `def` (the smoke profile's hardest token) and scores near 0.
        per_device_train_batch_size=32,
        learning_rate=args.lr or (3e-3 if args.lora else 5e-3),
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=steps // 10,
        weight_decay=0.0,
        max_length=None,  # never truncate: the completion comes last
        completion_only_loss=True,
        loss_type="nll",  # TRL's default, chunked_nll, refuses a PEFT-wrapped lm_head
        seed=0,
        data_seed=0,
        use_cpu=not torch.cuda.is_available(),
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config)
    trainer.train()
    shutil.rmtree(scratch, ignore_errors=True)
    trainer.model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
