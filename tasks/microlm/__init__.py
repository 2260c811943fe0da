"""microlm: the tiny character-level language model shared by the micro tasks.

    from microlm import checkpoint, data, decode, episodes, finetune, tokenizer, train
    from microlm.model import GPT, GPTConfig

- tokenizer   fixed character vocabulary (printable ASCII + newline + PAD/BOS/EOS/UNK)
- model       GPT: forward(idx, targets=None) -> (logits, loss)
- checkpoint  save(model, dir) / load(dir): config.json + model.pt, loaded without running code
- decode      generate(model, prompts, max_new_tokens, temperature, top_k, seed) -> completions
- data        (prompt, completion) batches with the loss on the completion only; read_jsonl
- episodes    multi-step episodes of a policy in a text environment (level 3): play, rollouts_main
- sampling    the rollout samplers' shared command line: parser, prepare, sample
- train       fit(model, batches, steps, lr_at): AdamW with clipping and progress lines; lr schedules
- finetune    a fine-tuning script's command line and loop: start checkpoint -> fit on pairs -> save

For task authors (import them by name; see tasks/_template): grading (a grader entry's command
line and checks), pretraining (pretrain.py's skeleton), splits (generate.py's output files),
testing (helpers of the tasks' unittest files and tasks/contract_test.py).

Everything runs on the CPU; set torch.set_num_threads yourself.
"""

from . import checkpoint, data, decode, episodes, finetune, model, sampling, tokenizer, train
from .checkpoint import CheckpointError
from .decode import generate
from .model import GPT, GPTConfig

__all__ = ["checkpoint", "data", "decode", "episodes", "finetune", "model", "sampling", "tokenizer", "train", "CheckpointError", "generate", "GPT", "GPTConfig"]
