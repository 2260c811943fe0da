"""The gsm8k oracle: supervised fine-tuning with TRL on the visible split, in the grader's exact prompt.

    python3 sft.py --data data/train.jsonl --base models/base --out submission [--lora] [--steps N]

Run in an agent's workspace (PYTHONPATH holding lib/, so hflm imports), for example as a run_training
job. Each row {question, answer} becomes one prompt-completion pair: the prompt is the grader's 4-shot
chat (hflm.gsm8k.messages) rendered with the model's chat template and the generation prompt, exactly
what the grader feeds the model; the completion is "The answer is N" (N from the row's "#### N") and the
end-of-sequence token, where the grader's generation stops. TRL's SFTTrainer trains on the completion's
tokens only. Writes a full model folder (safetensors, with the tokenizer) to --out, or with --lora a PEFT
LoRA adapter folder, which the grader merges onto the base. Seeded: the same inputs give the same model.

The defaults suit the smoke profile's tiny model on 2 CPU cores (tasks/hflm-tests/fixture_hub.py);
on a real base model lower --lr and batch on a GPU.
"""

import argparse
import json
import os
import shutil
import tempfile

from hflm import gsm8k


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/train.jsonl", help="the visible split, rows {question, answer}")
    parser.add_argument("--base", default="models/base", help="the base model folder")
    parser.add_argument("--out", required=True, help="where to write the model (or, with --lora, the adapter)")
    parser.add_argument("--lora", action="store_true", help="train and write a LoRA adapter instead of the full model")
    parser.add_argument("--steps", type=int, default=150, help="optimizer steps of batch 8")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: 3e-3 full, 1e-2 LoRA)")
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
                row = json.loads(line)
                prompt = tokenizer.apply_chat_template(gsm8k.messages(row["question"]), tokenize=False, add_generation_prompt=True)
                # SFTTrainer appends the end-of-sequence token to each completion.
                rows.append({"prompt": prompt, "completion": f"The answer is {gsm8k.reference_answer(row['answer'])}"})
    return rows


def main(argv=None):
    args = parse(argv)
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    # One thread by default, whatever OMP_NUM_THREADS the job has: two OpenMP threads spin against anything else on
    # the cores (the baseline's grading, another job) and stall; one also gives the same model on any core count.
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # An absolute path: the adapter records it as its base, and hflm.submission reads a relative "models/base"
    # as a hub id other than the run's model and refuses the adapter.
    base = os.path.abspath(args.base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_safetensors=True)
    dataset = Dataset.from_list(pairs(args.data, tokenizer))
    peft_config = None
    if args.lora:
        from peft import LoraConfig

        # Every linear layer: attention has to learn where to look, and lm_head must change too (a random base's
        # output head alone cannot put a clear maximum on the answer's tokens, whatever the layers below do).
        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM", target_modules=[
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"])
    scratch = tempfile.mkdtemp(prefix="sft-")  # the Trainer's own folder; nothing is kept there (save_strategy "no")
    try:
        config = SFTConfig(
            output_dir=scratch,
            max_steps=args.steps,
            per_device_train_batch_size=8,
            learning_rate=args.lr or (1e-2 if args.lora else 3e-3),
            lr_scheduler_type="cosine",
            warmup_steps=args.steps // 10,
            weight_decay=0.0,
            max_length=None,  # never truncate: the 4-shot prompt is long and the completion comes last
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
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.lora:
        # With lm_head adapted PEFT would also store the base's lm_head weights, which hflm.submission refuses as
        # not the base's layout; the adapter needs only its LoRA weights, merged onto the base's own head.
        trainer.model.save_pretrained(args.out, save_embedding_layers=False)
    else:
        trainer.model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
