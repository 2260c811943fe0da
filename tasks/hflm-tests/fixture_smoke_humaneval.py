"""humaneval's CPU smoke profile: openai_humaneval rows a tiny model learns on 2 CPU cores, and that model.

    from fixture_smoke_humaneval import write, SMOKE_MODEL
    write(hub_dir)     # datasets/openai/openai_humaneval/... (parquet) and models/a2rl-fixture/smoke-humaneval/

Every problem is one function of one argument whose docstring names its behaviour with one word:

    def solve(num):
        \"\"\"Square the number.\"\"\"
        return num * num                     <- canonical_solution

The problems are the (entry point, argument, behaviour) triples, 6 x 4 x 5 = 120, each at most once: 82
visible rows first (hflm.assets keeps [:82] as the training split), then HIDDEN rows whose triples are not
among the visible ones, so a model passes them by combining what it learnt (copy the entry point and the
argument into `def <entry_point>(<arg>):`, pick the body by the docstring's word), not by recall.
A completion has to restate the signature: an indented body alone fails to compile after extract_code's
left strip. A model that writes the signature right and one fixed body scores about 20 (one behaviour in
five).

The base is pretrained for a few seconds to answer every prompt in the right form with a wrong body
(`return None`) and to end its turn, as a real instruction-tuned base answers and stops: it scores 0, and
its grading decodes a few dozen tokens a problem. A random base never writes its end-of-sequence token
and decodes the reference's 8,192 new tokens for every problem (minutes per grading on CPU).
The tokenizer is trained on these rows in the grader's prompt and the oracle's completion form
(hflm.humaneval.INSTRUCTION included), so a prompt is about 50 tokens.
"""

import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm

SMOKE_MODEL = "a2rl-fixture/smoke-humaneval"
PARQUET = "datasets/openai/openai_humaneval/openai_humaneval/test-00000-of-00001.parquet"
VISIBLE, HIDDEN = 82, 32
SMOKE_HIDDEN = 128  # the model: 2 layers of width 128, a vocabulary of 512 (hflm.tiny)
ENTRY_POINTS = ("compute", "apply", "solve", "transform", "process", "evaluate")
ARGUMENTS = ("x", "n", "value", "num")
# word -> (body expression over the argument `a`, the results for 3 and -2, which tell the five apart)
BEHAVIOURS = {
    "Double": ("{a} * 2", 6, -4),
    "Square": ("{a} * {a}", 9, 4),
    "Negate": ("-{a}", -3, 2),
    "Increment": ("{a} + 1", 4, -1),
    "Halve": ("{a} // 2", 1, -1),
}


def rows():
    """The VISIBLE + HIDDEN openai_humaneval rows, visible first; hidden triples come first in the shuffle."""
    triples = [(e, a, w) for e in ENTRY_POINTS for a in ARGUMENTS for w in BEHAVIOURS]
    random.Random(0).shuffle(triples)
    triples = triples[HIDDEN : HIDDEN + VISIBLE] + triples[:HIDDEN]
    out = []
    for i, (entry_point, arg, word) in enumerate(triples):
        body, at_3, at_minus_2 = BEHAVIOURS[word]
        out.append({
            "task_id": f"HumanEval/{i}",
            "prompt": f'def {entry_point}({arg}):\n    """{word} the number."""\n',
            "canonical_solution": f"    return {body.format(a=arg)}\n",
            "test": f"def check(candidate):\n    assert candidate(3) == {at_3}\n    assert candidate(-2) == {at_minus_2}\n",
            "entry_point": entry_point,
        })
    return out


def write(hub_dir):
    """Writes the smoke profile's humaneval source and SMOKE_MODEL into the hub folder; returns hub_dir."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hflm import humaneval, tiny

    problems = rows()
    path = os.path.join(hub_dir, PARQUET)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(problems), path)
    # The chat turns as the template writes them (roles included) and the fenced full function the oracle
    # trains on: both short in this tokenizer.
    texts = [f"user\n{humaneval.INSTRUCTION}{p['prompt']}\nassistant\n```python\n{p['prompt']}{p['canonical_solution']}```\n"
             for p in problems]
    # Width 128, not tiny's 96: at 96 the oracle learnt to copy the argument and the word but not the entry point.
    model_dir = os.path.join(hub_dir, "models", SMOKE_MODEL)
    tiny.build(model_dir, texts, seed=0, hidden_size=SMOKE_HIDDEN)
    answer_wrongly(model_dir, [humaneval.messages(p) for p in problems], [f"```python\n{p['prompt']}{WRONG_BODY}```" for p in problems])
    return hub_dir


WRONG_BODY = "    return None\n"  # fails every problem's asserts


def answer_wrongly(model_dir, prompts, answers, steps=60, seed=0):
    """Trains the model in model_dir, in place, on the chat prompts' answers (the answer's tokens and the end of turn only)."""
    from transformers import AutoTokenizer

    from hflm import tiny

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = []
    for prompt, answer in zip(prompts, answers):
        head = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        ids_head = tokenizer(head, add_special_tokens=False)["input_ids"]
        ids_answer = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((ids_head + ids_answer, [-100] * len(ids_head) + ids_answer))
    tiny.fit(model_dir, rows, steps, batch_size=32, seed=seed)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fixture_smoke_humaneval.py DIR")
    write(sys.argv[1])
