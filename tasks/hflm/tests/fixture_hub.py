"""A fixture hub snapshot: the full tier's sources in their exact formats, a few rows each, and a tiny model.

    .venv-full/bin/python tasks/hflm/tests/fixture_hub.py DIR      # what test/helpers/fixture-hub.ts runs

Writes the layout hflm.assets reads (--from DIR): datasets/<repo id>/<the repo's files> as parquet (and
alpaca_eval's JSON and df_gamed.csv, fixture_length_control), and models/<FIXTURE_MODEL>/ built by hflm.tiny. Row counts are small except where a
cut is tested: humaneval has the real 164 rows, alpaca 2,003 (its visible split is [:2000]).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # tasks/, for hflm
sys.path.insert(0, HERE)  # for fixture_length_control, when run as a script

import fixture_length_control  # noqa: E402

FIXTURE_MODEL = "a2rl-fixture/tiny-qwen2"
COUNTS = {"gsm8k_train": 5, "gsm8k_test": 7, "humaneval": 164, "alpaca": 2003, "alpaca_eval": 9}


def gsm8k_rows(split, n):
    return [{"question": f"{split} {i}: Tom has {i} apples and buys 2 more. How many now?",
             "answer": f"{i} + 2 = {i + 2}\n#### {i + 2}"} for i in range(n)]


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


def write(out_dir, counts=COUNTS):
    datasets = os.path.join(out_dir, "datasets")
    write_parquet(os.path.join(datasets, "openai/gsm8k/main/train-00000-of-00001.parquet"), gsm8k_rows("train", counts["gsm8k_train"]))
    write_parquet(os.path.join(datasets, "openai/gsm8k/main/test-00000-of-00001.parquet"), gsm8k_rows("test", counts["gsm8k_test"]))
    write_parquet(os.path.join(datasets, "openai/openai_humaneval/openai_humaneval/test-00000-of-00001.parquet"),
                  humaneval_rows(counts["humaneval"]))
    write_parquet(os.path.join(datasets, "tatsu-lab/alpaca/data/train-00000-of-00001-a09b74b3ef9c3b56.parquet"),
                  alpaca_rows(counts["alpaca"]))
    os.makedirs(os.path.join(datasets, "tatsu-lab/alpaca_eval"), exist_ok=True)
    with open(os.path.join(datasets, "tatsu-lab/alpaca_eval/alpaca_eval_gpt4_baseline.json"), "w") as f:
        json.dump(alpaca_eval_rows(counts["alpaca_eval"]), f, indent=4)
    fixture_length_control.write(out_dir, counts["alpaca_eval"])

    from hflm import tiny

    texts = [r["question"] + r["answer"] for r in gsm8k_rows("train", 20)]
    tiny.build(os.path.join(out_dir, "models", FIXTURE_MODEL), texts, seed=0, vocab_size=300, hidden_size=32, layers=1)
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fixture_hub.py DIR")
    write(sys.argv[1])
