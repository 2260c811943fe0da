"""A fixture hub snapshot: the full tier's sources in their exact formats, a few rows each, and a tiny model.

    .venv-full/bin/python tasks/hflm-tests/fixture_hub.py DIR                    # what test/helpers/fixture-hub.ts runs
    .venv-full/bin/python tasks/hflm-tests/fixture_hub.py DIR --profile smoke    # the CPU smoke profiles' data

Writes the layout hflm.assets reads (--from DIR): datasets/<repo id>/<the repo's files> as parquet (and
alpaca_eval's JSON and df_gamed.csv, fixture_length_control), alfworld's game files and prompt file
(fixture_smoke_alfworld: alfworld/, github/ysymyth/ReAct/), WebShop's data files (fixture_smoke_webshop:
github/princeton-nlp/WebShop/data/), and models/<model id>/ built by hflm.tiny. Row counts are
small except where a
cut is tested: humaneval has the real 164 rows, alpaca 2,003 (its visible split is [:2000]).

Profiles:
- "default": FIXTURE_MODEL and a handful of gsm8k rows; for tests of the pipeline's form, not of learning.
- "gpu-check": the default rows and GPU_CHECK_MODEL, a tiny model shaped as vLLM's attention kernels take it
  (head size 64), for bench/gpu-check.sh's offline mode.
- "smoke": every task's learnable sources and tiny model, for the CPU smoke profiles (task.json "smoke"): gsm8k's
  here (SMOKE_MODEL), alpacaeval's and humaneval's in fixture_smoke_alpacaeval and fixture_smoke_humaneval. gsm8k's rows a tiny model learns on 2 CPU cores
  within minutes (SMOKE_COUNTS):
  "How many pens does Ann have? Ann has seven." -> 7. The answer is decided by one number word (five to
  nine, none of which the 4-shot exemplars use), so a model must look the word up; writing "The answer is
  N" alone scores about 20 (one class in five). The test rows' (name, item, word) triples are not in the
  train rows. The tokenizer is trained on these rows and on hflm.gsm8k's exemplars and user turn, so the
  grader's 4-shot prompt stays near 1.4k tokens.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm
sys.path.insert(0, HERE)  # for fixture_length_control, when run as a script

import fixture_length_control  # noqa: E402
import fixture_smoke_alfworld  # noqa: E402
import fixture_smoke_alpacaeval  # noqa: E402
import fixture_smoke_deepsearchqa  # noqa: E402
import fixture_smoke_humaneval  # noqa: E402
import fixture_smoke_webshop  # noqa: E402

FIXTURE_MODEL = "a2rl-fixture/tiny-qwen2"
SMOKE_MODEL = "a2rl-fixture/smoke-qwen2"
COUNTS = {"gsm8k_train": 5, "gsm8k_test": 7, "humaneval": 164, "alpaca": 2003, "alpaca_eval": 9}
SMOKE_COUNTS = {**COUNTS, "gsm8k_train": 400, "gsm8k_test": 100}
GPU_CHECK_MODEL = "a2rl-fixture/gpu-check-qwen2"
PROFILES = ("default", "smoke", "gpu-check")
SMOKE_NAMES = ("Ann", "Ben", "Tom", "Mia", "Sam", "Liz", "Joe", "Eva", "Max", "Zoe")
SMOKE_ITEMS = ("pens", "cups", "books", "coins", "hats", "cards", "shells", "stamps", "rocks", "keys")
SMOKE_WORDS = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
# The smoke model: 2 layers of width 64 (about 0.18M parameters), every layer attending to its last 64 tokens
# (hflm.tiny.build: without a window, 200 steps learnt the format but not the lookup). A vocabulary of 1,024 is
# more than the texts' words need (714 tokens are learnt), so the 4-shot prompt is about 1,440 tokens.
SMOKE_VOCAB, SMOKE_HIDDEN, SMOKE_LAYERS, SMOKE_WINDOW = 1024, 64, 2, 64


def gsm8k_rows(split, n):
    return [{"question": f"{split} {i}: Tom has {i} apples and buys 2 more. How many now?",
             "answer": f"{i} + 2 = {i + 2}\n#### {i + 2}"} for i in range(n)]


def smoke_gsm8k_rows(counts):
    """(train, test) rows of the smoke profile: every (name, item, word) triple at most once, test triples first."""
    import random

    triples = [(name, item, word) for name in SMOKE_NAMES for item in SMOKE_ITEMS for word in SMOKE_WORDS]
    random.Random(0).shuffle(triples)
    rows = [{"question": f"How many {item} does {name} have? {name} has {word}.",
             "answer": f"{name} has {word} {item}, that is {SMOKE_WORDS[word]}.\n#### {SMOKE_WORDS[word]}"}
            for name, item, word in triples]
    test = counts["gsm8k_test"]
    return rows[test : test + counts["gsm8k_train"]], rows[:test]


def humaneval_rows(n):
    return [{"task_id": f"HumanEval/{i}", "prompt": f"def add_{i}(x):\n    \"\"\"Return x + {i}.\"\"\"\n",
             "canonical_solution": f"    return x + {i}\n", "test": f"def check(f):\n    assert f(1) == {i + 1}\n",
             "entry_point": f"add_{i}"} for i in range(n)]


def alpaca_rows(n):
    return [{"instruction": f"Say the number {i}.", "input": "", "output": f"{i}", "text": f"### Instruction: Say the number {i}."}
            for i in range(n)]


def alpaca_eval_rows(n):
    return [{"dataset": "helpful_base", "instruction": f"Name a colour, number {i}.", "output": f"Blue ({i}).",
             "generator": "gpt4_1106_preview"} for i in range(n)]


def write_parquet(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def write(out_dir, counts=None, profile="default"):
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
    counts = counts or (SMOKE_COUNTS if profile == "smoke" else COUNTS)
    if profile == "smoke":
        train, test = smoke_gsm8k_rows(counts)
    else:
        train, test = gsm8k_rows("train", counts["gsm8k_train"]), gsm8k_rows("test", counts["gsm8k_test"])
    datasets = os.path.join(out_dir, "datasets")
    write_parquet(os.path.join(datasets, "openai/gsm8k/main/train-00000-of-00001.parquet"), train)
    write_parquet(os.path.join(datasets, "openai/gsm8k/main/test-00000-of-00001.parquet"), test)
    write_parquet(os.path.join(datasets, "openai/openai_humaneval/openai_humaneval/test-00000-of-00001.parquet"),
                  humaneval_rows(counts["humaneval"]))
    write_parquet(os.path.join(datasets, "tatsu-lab/alpaca/data/train-00000-of-00001-a09b74b3ef9c3b56.parquet"),
                  alpaca_rows(counts["alpaca"]))
    os.makedirs(os.path.join(datasets, "tatsu-lab/alpaca_eval"), exist_ok=True)
    with open(os.path.join(datasets, "tatsu-lab/alpaca_eval/alpaca_eval_gpt4_baseline.json"), "w") as f:
        json.dump(alpaca_eval_rows(counts["alpaca_eval"]), f, indent=4)
    fixture_length_control.write(out_dir, counts["alpaca_eval"])
    # alfworld's game files and prompt file, a few games (its smoke games and model: fixture_smoke_alfworld --profile smoke).
    fixture_smoke_alfworld.write(out_dir, "default")
    # deepsearchqa's csv (its smoke questions and model: fixture_smoke_deepsearchqa, below).
    fixture_smoke_deepsearchqa.write(out_dir, "default")
    # webshop's data files (WebShop's data/ folder: products, attributes, human instructions).
    fixture_smoke_webshop.write(out_dir)

    from hflm import gsm8k, tiny

    if profile == "smoke":
        # The exemplars and the user turn in the tokenizer's texts keep the 4-shot prompt short (1.4k tokens, not 4.4k).
        texts = [r["question"] + "\n" + r["answer"] for r in train]
        texts += [gsm8k.USER_TURN.replace("{question}", q) + "\n" + a for q, a in gsm8k.EXEMPLARS]
        tiny.build(os.path.join(out_dir, "models", SMOKE_MODEL), texts, seed=0, vocab_size=SMOKE_VOCAB,
                   hidden_size=SMOKE_HIDDEN, layers=SMOKE_LAYERS, sliding_window=SMOKE_WINDOW)
        # The other tasks' smoke sources replace the default rows written above, each with its own tiny model.
        fixture_smoke_alpacaeval.write(out_dir)
        fixture_smoke_humaneval.write(out_dir)
        fixture_smoke_deepsearchqa.write(out_dir, "smoke")
        fixture_smoke_webshop.write_smoke_model(out_dir)
        fixture_smoke_alfworld.write(out_dir, "smoke")
        return out_dir
    texts = [r["question"] + r["answer"] for r in gsm8k_rows("train", 20)]
    if profile == "gpu-check":
        # 4 heads of 64 (vLLM's attention backends take head sizes from 32 up); the exemplars in the tokenizer's texts
        # keep the 4-shot prompt well inside the model's context.
        texts += [gsm8k.USER_TURN.replace("{question}", q) + "\n" + a for q, a in gsm8k.EXEMPLARS]
        tiny.build(os.path.join(out_dir, "models", GPU_CHECK_MODEL), texts, seed=0, vocab_size=512, hidden_size=256, layers=2)
        return out_dir
    tiny.build(os.path.join(out_dir, "models", FIXTURE_MODEL), texts, seed=0, vocab_size=300, hidden_size=32, layers=1)
    return out_dir


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Write a fixture hub snapshot folder.")
    parser.add_argument("dir")
    parser.add_argument("--profile", choices=PROFILES, default="default")
    args = parser.parse_args()
    write(args.dir, profile=args.profile)
