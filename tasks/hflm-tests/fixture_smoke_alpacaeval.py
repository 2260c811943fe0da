"""alpacaeval's CPU smoke profile for a fixture hub: alpaca and alpaca_eval rows a tiny model learns from in a minute.

    fixture_smoke_alpacaeval.write(hub_dir)    # fixture_hub.write(profile="smoke") calls it, after its own files

Writes, in the exact formats hflm.assets reads, replacing what the hub holds there:
- datasets/tatsu-lab/alpaca/data/train-00000-of-00001-a09b74b3ef9c3b56.parquet: 2,003 rows {instruction, input,
  output, text} (the visible split is [:2000]), text in Alpaca's own prompt format, input empty;
- datasets/tatsu-lab/alpaca_eval/alpaca_eval_gpt4_baseline.json: EVAL_ROWS rows {instruction, output, generator,
  dataset}, and df_gamed.csv for them (fixture_length_control);
- models/SMOKE_MODEL/: a random tiny Qwen2 (hflm.tiny) whose tokenizer is trained on these texts.

What is learnt: every instruction asks for one thing of a KIND (a colour, a fruit, an animal or a drink), decided by
that one word; Alpaca's outputs name one (“One colour is blue.”). The evaluation instructions are held out (people and
occasions the train rows never use) and their references are refusals (“I cannot help with that.”), which follow
no instruction. The smoke judge (test/helpers/smoke-judge.ts) prefers the response that names something of the
requested kind and nothing of another kind: the random base writes a long jumble (nothing, or several kinds), the
trained model answers in kind and wins. KINDS is that judge's table (test/smoke-judge.test.ts
checks that the two agree).
"""

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm
sys.path.insert(0, HERE)  # for fixture_length_control, when run as a script

import fixture_length_control  # noqa: E402

SMOKE_MODEL = "a2rl-fixture/smoke-alpacaeval"
ALPACA_ROWS, EVAL_ROWS = 2003, 40
ALPACA_PATH = "datasets/tatsu-lab/alpaca/data/train-00000-of-00001-a09b74b3ef9c3b56.parquet"
EVAL_PATH = "datasets/tatsu-lab/alpaca_eval/alpaca_eval_gpt4_baseline.json"
KINDS = {
    "colour": ("red", "blue", "green", "yellow"),
    "fruit": ("apple", "banana", "cherry", "mango"),
    "animal": ("cat", "dog", "horse", "tiger"),
    "drink": ("tea", "coffee", "milk", "juice"),
}
# The train and the evaluation instructions share the templates (a tiny model learns a template's shape, not
# English) but not the people or the occasions: no evaluation instruction is a train instruction.
# The kind is the instruction's last word, a few tokens before the answer, which starts by repeating it: a short
# look back, which a LoRA adapter of a random base learns within a minute.
TEMPLATES = ("Name a {kind}.", "Give me one {kind}.", "Please suggest a {kind}.", "Can you name a {kind}?",
             "What is a good {kind}?", "I would like a {kind}.")
TRAIN_CONTEXT = (("Ann", "party"), ("Ben", "picnic"), ("Tom", "trip"), ("Mia", "lunch"), ("Sam", "game"),
                 ("Liz", "class"), ("Joe", "walk"), ("Eva", "visit"))
EVAL_CONTEXT = (("Kim", "dinner"), ("Leo", "holiday"), ("Zoe", "meeting"), ("Max", "concert"))
REFUSALS = ("I cannot help with that.", "Sorry, I can't answer that.", "I am not able to help with this request.")
# The head of Alpaca's `text` column for a row without an input (every row here: the grader's prompt has none).
ALPACA_HEAD = "Below is an instruction that describes a task. Write a response that appropriately completes the request."


def alpaca_rows(rng):
    """Alpaca's train rows: half the instructions ask straight away, half after a sentence of context."""
    rows = []
    for i in range(ALPACA_ROWS):
        kind = rng.choice(sorted(KINDS))
        name, occasion = rng.choice(TRAIN_CONTEXT)
        ask = rng.choice(TEMPLATES).format(kind=kind)
        instruction = ask if i % 2 == 0 else f"{name} is planning a {occasion}. {ask}"
        # The kind first, then the member: the member is chosen next to the kind just written, not from the prompt.
        output = f"One {kind} is {rng.choice(KINDS[kind])}."
        text = f"{ALPACA_HEAD}\n\n### Instruction:\n{instruction}\n\n### Response:\n{output}"
        rows.append({"instruction": instruction, "input": "", "output": output, "text": text})
    return rows


def alpaca_eval_rows(rng):
    """alpaca_eval_gpt4_baseline's rows: distinct held-out instructions, refusals as the outputs."""
    asks = [(name, occasion, template.format(kind=kind)) for name, occasion in EVAL_CONTEXT for kind in sorted(KINDS)
            for template in TEMPLATES]
    rng.shuffle(asks)
    return [{"instruction": f"{name} is planning a {occasion}. {ask}", "output": REFUSALS[i % len(REFUSALS)],
             "generator": "gpt4_1106_preview", "dataset": ("helpful_base", "koala", "oasst", "vicuna")[i % 4]}
            for i, (name, occasion, ask) in enumerate(asks[:EVAL_ROWS])]


def write_parquet(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def write(hub_dir):
    """Writes the profile's sources and SMOKE_MODEL into hub_dir; returns hub_dir."""
    rng = random.Random(0)
    train, evaluation = alpaca_rows(rng), alpaca_eval_rows(rng)
    write_parquet(os.path.join(hub_dir, ALPACA_PATH), train)
    os.makedirs(os.path.dirname(os.path.join(hub_dir, EVAL_PATH)), exist_ok=True)
    with open(os.path.join(hub_dir, EVAL_PATH), "w") as f:
        json.dump(evaluation, f, indent=4)
    fixture_length_control.write(hub_dir, len(evaluation))

    from hflm import tiny

    texts = [r["instruction"] + "\n" + r["output"] for r in train]
    texts += [r["instruction"] + "\n" + r["output"] for r in evaluation]
    tiny.build(os.path.join(hub_dir, "models", SMOKE_MODEL), texts, seed=0, vocab_size=512, hidden_size=64, layers=2)
    return hub_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fixture_smoke_alpacaeval.py DIR")
    write(sys.argv[1])
