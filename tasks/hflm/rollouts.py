"""The full tier's rollout sampler: scored completions of a checkpoint on a task's training prompts.

    python -m hflm.rollouts --task {gsm8k,humaneval,alpacaeval,alfworld,deepsearchqa,webshop,webshop-human} --checkpoint DIR --base DIR --data FILE \\
        --n N [--group-size G] [--temperature T] [--top-p P] [--seed S] [--max-new-tokens M] [--threads K] --out FILE

launch_rollouts runs it in the agent's sandbox (--base models/base, --data data/train.jsonl). It picks
n / group-size distinct rows of --data at random (seeded by --seed, as the micro tier's samplers do) and
samples group-size completions of each (the groups GRPO compares), with the grader's prompt for the task
and hflm.inference's generation at the given temperature, top-p and seed. The checkpoint is a full model
folder or a PEFT LoRA adapter of --base, checked as a submission is (hflm.submission). One JSON line per
completion, each group written and flushed as soon as it is done, so a stopped job leaves whole lines:

    {"group": g, "prompt_id": row index in --data, "prompt": [chat messages], "completion": "...", ...}

    gsm8k:      + "question", "answer", "prediction" (the number read, or null), "reward": 1.0 when it is the
                  answer after "#### " (hflm.gsm8k's reading and comparison), else 0.0
    humaneval:  + "task_id", "reward": 1.0 when prompt + extracted code + test runs without raising within
                  3 s (hflm.humaneval), else 0.0
    alfworld:   one line per episode instead, played in the game's env (hflm.alfworld.sample_episodes): "group",
                  "prompt_id", "gamefile", "name", "prompt_key", "prompt", "completions", "actions",
                  "observations", "won", "steps", "reward" (1.0 when won)
    deepsearchqa: one line per episode instead, the ReAct loop searching through the run's channel
                  (hflm.deepsearchqa.sample_episodes): "group", "prompt_id", "id", "question", "answer_type", "answer",
                  "prompt", "segments", "completions", "searches", "predicted", "steps", "ended", "reward" (1.0
                  when the reference's string match says the prediction holds the answer)
    webshop, webshop-human: one line per episode instead, played in WebShop's text env (hflm.webshop.sample_episodes):
                  "group", "prompt_id", "goal_index", "instruction", "prompt" (the first step's chat),
                  "completions", "actions", "observations", "available_actions", "reward" (the env's, 0 unless
                  bought), "won" (reward >= 0.5; webshop-human: reward 1), "done", "steps"
    alpacaeval: + "instruction" (the row's instruction, its input after a blank line when it has one),
                  "reference" (the row's output); no reward: the server's judge compares completion and
                  reference and adds "reward"

Then one JSON summary line on stdout: {"episodes": n, "mean_reward": x or null, "out": path}. Progress goes
to stderr. The same arguments give the same rollouts: pass a new --seed for fresh samples. A bad argument,
data file or checkpoint prints "error: ..." on stderr and exits with status 2; so does a job that was given GPUs
(A2RL_REQUIRE_GPU=1, which launch_rollouts sets then) and cannot use them ("error: GPU unavailable: <why>"), before
it samples anything: it never samples on CPU instead.
"""

import argparse
import collections
import json
import os
import random
import shutil
import sys
import tempfile
import time

from . import alfworld, alpacaeval, deepsearchqa, gpu, gsm8k, humaneval, webshop
from .inference import GenerationParams, default_backend, generate
from .model_dir import ModelFolderError, check_model_dir
from .submission import SubmissionError, inspect, materialise

# The graders' output limits; humaneval's reference allows 8192 new tokens, which on CPU takes hours per
# group, so its sampler stops at 512 unless told otherwise (its solutions are far shorter).
MAX_NEW_TOKENS = {"gsm8k": gsm8k.GENERATION.max_new_tokens, "humaneval": 512, "alpacaeval": 512,
                  "alfworld": alfworld.GENERATION.max_new_tokens, "deepsearchqa": deepsearchqa.GENERATION.max_new_tokens,
                  "webshop": webshop.GENERATION.max_new_tokens, "webshop-human": webshop.GENERATION.max_new_tokens}


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def is_text(row, *keys):
    return isinstance(row, dict) and all(isinstance(row.get(k), str) for k in keys)


def alpaca_instruction(row):
    """An alpaca row's instruction as one text: AlpacaEval's instructions carry their input the same way."""
    extra = row.get("input") or ""
    return row["instruction"] + ("\n\n" + extra if extra.strip() else "")


def gsm8k_fields(row, completion):
    prediction = gsm8k.extract_answer(completion)
    reward = float(gsm8k.is_correct(prediction, gsm8k.reference_answer(row["answer"])))
    return {"question": row["question"], "answer": row["answer"], "prediction": prediction, "reward": reward}


def humaneval_fields(row, completion):
    passed = humaneval.run_program(humaneval.build_program(row, humaneval.extract_code(completion)))
    return {"task_id": row["task_id"], "reward": float(passed)}


def alpacaeval_fields(row, completion):
    return {"instruction": alpaca_instruction(row), "reference": row["output"]}


# Per task: its prompt (the grader's), what a --data row must hold (and the rule said when one does not),
# and the episode's own fields.
Task = collections.namedtuple("Task", "messages valid rule fields")
TASKS = {
    "gsm8k": Task(
        lambda row: gsm8k.messages(row["question"]),
        lambda row: is_text(row, "question", "answer") and "#### " in row["answer"],
        'a JSON object with "question" and "answer" (ending "#### <number>") as text',
        gsm8k_fields,
    ),
    "humaneval": Task(
        humaneval.messages,
        lambda row: is_text(row, "task_id", "prompt", "test", "entry_point"),
        'a JSON object with "task_id", "prompt", "test" and "entry_point" as text',
        humaneval_fields,
    ),
    "alpacaeval": Task(
        lambda row: alpacaeval.messages(alpaca_instruction(row)),
        lambda row: is_text(row, "instruction", "output") and isinstance(row.get("input", ""), str),
        'a JSON object with "instruction" and "output" (and optionally "input") as text',
        alpacaeval_fields,
    ),
    # Episodes in ALFWorld's env, not one completion per row: hflm.alfworld.sample_episodes plays them.
    "alfworld": Task(
        None,
        lambda row: is_text(row, "gamefile", "name"),
        'a JSON object with "gamefile" (relative to the file\'s folder) and "name" as text (data/train.jsonl)',
        None,
    ),
    # Episodes of the ReAct loop, searching through the run's channel: hflm.deepsearchqa.sample_episodes plays them.
    "deepsearchqa": Task(
        None,
        lambda row: is_text(row, "question", "answer", "answer_type"),
        'a JSON object with "question", "answer" and "answer_type" as text (data/train.jsonl)',
        None,
    ),
    # Episodes in WebShop's env: hflm.webshop.sample_episodes plays them (a goal of the env over data/webshop).
    **{task: Task(
        None,
        lambda row: isinstance(row, dict) and type(row.get("goal_index")) is int and row["goal_index"] >= 0,
        'a JSON object with "goal_index" (a goal of the env over the file\'s folder\'s webshop/) as a number (data/train.jsonl)',
        None,
    ) for task in ("webshop", "webshop-human")},
}

# The interactive tasks: each samples whole episodes in its environment, not one completion per row.
EPISODE_SAMPLERS = {"alfworld": alfworld.sample_episodes, "deepsearchqa": deepsearchqa.sample_episodes,
                    "webshop": webshop.sample_episodes, "webshop-human": webshop.sample_episodes}


def episode_fields(task, row, completion):
    """The task's own fields of one episode, with its reward where the sandbox scores it."""
    return TASKS[task].fields(row, completion)


def parser():
    p = argparse.ArgumentParser(
        prog="python -m hflm.rollouts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--task", required=True, choices=sorted(TASKS))
    p.add_argument("--checkpoint", required=True, help="a full model folder or a LoRA adapter folder of --base")
    p.add_argument("--base", required=True, help="the run's base model folder (models/base)")
    p.add_argument("--data", required=True, help="JSONL of the task's training rows (data/train.jsonl)")
    p.add_argument("--n", type=int, required=True, help="total number of completions")
    p.add_argument("--group-size", type=int, default=1, help="completions per prompt; must divide n")
    p.add_argument("--temperature", type=float, default=1.0, help="0: greedy (every completion of a group the same)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=None, help=(
        "default: the grader's limit, 512 (gsm8k, alpacaeval); humaneval's grader allows 8192, its default here "
        "is 512 to keep CPU runs sane"))
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    p.add_argument("--out", required=True, help="output JSONL path")
    return p


def read_rows(args):
    valid, rule = TASKS[args.task].valid, TASKS[args.task].rule
    try:
        with open(args.data, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read --data {args.data}: {e}; pass the task's data/train.jsonl")
    bad = next((i for i, row in enumerate(rows) if not valid(row)), None)
    if bad is not None:
        fail(f"--data line {bad + 1} is not a {args.task} row: every line must be {rule}")
    return rows


def policy_folder(checkpoint, base, scratch):
    """The full model folder to sample from: the checkpoint itself when it loads as it is, else materialised.

    Checked as a submission is, so what is refused here is refused at submit time too. A full model with its
    own loadable tokenizer is read in place (no copy of gigabytes); an adapter is merged onto the base, and a
    folder without tokenizer files (or one that needs hflm.submission's repair) is completed, in scratch.
    """
    if not os.path.isfile(os.path.join(base, "config.json")):
        fail(f"--base {base} is not a model folder (no config.json): pass the run's base model, models/base")
    try:
        found = inspect(checkpoint, base)
        if found.kind == "full" and found.tokenizer == "submission" and not found.tokenizer_repairs:
            try:
                check_model_dir(checkpoint)
                return checkpoint
            except ModelFolderError:  # e.g. a Trainer's pickled state beside the model: materialise leaves it out
                pass
        out = os.path.join(scratch, "policy")
        print(f"rollouts: {'merging the adapter' if found.kind == 'lora' else 'completing the model'} into {out}",
              file=sys.stderr, flush=True)
        materialise(checkpoint, base, out)
        return out
    except SubmissionError as e:
        fail(f"invalid checkpoint ({e.code}): {e}")


def main(argv=None):
    args = parser().parse_args(argv)
    if args.max_new_tokens is None:
        args.max_new_tokens = MAX_NEW_TOKENS[args.task]
    if args.n < 1 or args.group_size < 1 or args.n % args.group_size:
        fail(f"--n ({args.n}) must be a positive multiple of --group-size ({args.group_size})")
    if args.temperature < 0 or not 0 < args.top_p <= 1 or args.max_new_tokens < 1 or (args.threads or 1) < 1:
        fail("--temperature must be >= 0, --top-p in (0, 1], --max-new-tokens and --threads >= 1")
    rows = read_rows(args)
    n_groups = args.n // args.group_size
    if n_groups > len(rows):
        fail(f"--n / --group-size = {n_groups} prompts, but --data has only {len(rows)} rows: lower --n or raise --group-size")
    indices = random.Random(args.seed).sample(range(len(rows)), n_groups)

    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # stderr stays for progress and errors
    try:
        backend = default_backend()
    except gpu.GpuUnavailable as e:  # given GPUs it cannot use: said before any work, never sampled on CPU instead
        fail(f"GPU unavailable: {e}")
    scratch = tempfile.mkdtemp(prefix="hflm-rollouts-")
    try:
        model_dir = policy_folder(args.checkpoint, args.base, scratch)
        return sample(args, rows, indices, model_dir, backend)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def sample(args, rows, indices, model_dir, backend):
    import torch

    if args.task in EPISODE_SAMPLERS:
        return EPISODE_SAMPLERS[args.task](args, rows, indices, model_dir, backend)
    make_prompt = TASKS[args.task].messages
    # The transformers backend loads the model per call, which costs little beside CPU decoding, so each
    # group is its own call and is written when done; a vLLM engine takes long to start, so it gets all groups at once.
    per_call = len(indices) if backend == "vllm" else 1
    total, rewarded = 0.0, 0
    start = time.time()
    with open(args.out, "w", encoding="utf-8") as f:
        for first in range(0, len(indices), per_call):
            groups = range(first, min(first + per_call, len(indices)))
            prompts = [make_prompt(rows[indices[g]]) for g in groups]
            params = GenerationParams(
                max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                n=args.group_size, seed=(args.seed * 1_000_003 + first) % 2**31,  # each call its own stream
            )
            try:
                texts = generate(model_dir, prompts, params, backend=backend)
            except (ModelFolderError, ValueError) as e:  # e.g. a tokenizer without a chat template
                fail(f"cannot sample from --checkpoint {args.checkpoint}: {e}")
            except torch.OutOfMemoryError as e:  # the groups written so far stay whole
                fail(f"out of GPU memory while sampling ({e}): ask for fewer episodes per batch or more GPUs")
            for k, g in enumerate(groups):
                row = rows[indices[g]]
                for completion in texts[k * args.group_size : (k + 1) * args.group_size]:
                    if args.task == "alpacaeval":
                        completion = completion.strip()  # as the grader strips outputs before the judge reads them
                    episode = {"group": g, "prompt_id": indices[g], "prompt": prompts[k], "completion": completion}
                    episode.update(episode_fields(args.task, row, completion))
                    if "reward" in episode:
                        total, rewarded = total + episode["reward"], rewarded + 1
                    f.write(json.dumps(episode, ensure_ascii=False) + "\n")
                f.flush()
            print(f"rollouts: {groups.stop}/{len(indices)} groups in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    mean = round(total / rewarded, 4) if rewarded else None
    print(json.dumps({"episodes": args.n, "mean_reward": mean, "out": args.out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
