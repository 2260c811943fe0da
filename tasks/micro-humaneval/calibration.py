"""What the base model gets right on training problems, greedy and sampled: the figures instructions.md states.

    PYTHONPATH=<dir holding microlm and micro_humaneval> python3 calibration.py [--checkpoint model]

Prints one JSON object: greedy and temperature-1 pass rates (a pass: every test passes,
scored as launch_rollouts scores episodes: build_program, run_programs, compare), the share
of programs that parse, and the pass rates per kind of family (arithmetic, boolean, list,
string). Seeded and single-threaded, so the same checkpoint gives the same figures;
tests/test_micro_humaneval.py recomputes them to check what instructions.md says.
"""

import argparse
import ast
import json
import os
import random

# One thread in every pool, before torch loads: sampled completions then do not depend on the core count.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402

from microlm import checkpoint, data, generate  # noqa: E402
from micro_humaneval import build_program, format_prompt  # noqa: E402
from micro_humaneval.execute import compare, run_programs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("arithmetic", "boolean", "list", "string")
GREEDY_PROBLEMS = 400
SAMPLED_PROBLEMS = 200
SAMPLES_PER_PROBLEM = 8  # a launch_rollouts group
SEED = 0


def family_kind(item):
    """arithmetic, boolean, list or string: by the first argument's type, then (integers) by the answer's type."""
    first_arg = item["tests"][0]["args"][0]
    if isinstance(first_arg, list):
        return "list"
    if isinstance(first_arg, str):
        return "string"
    return "boolean" if isinstance(item["tests"][0]["expected"], bool) else "arithmetic"


def parses(program):
    try:
        ast.parse(program)
        return True
    except SyntaxError:
        return False


def score(items, completions):
    """(program parses, every test passes) for each completion of its item, as the rollouts score them."""
    programs = [build_program(format_prompt(it), c) for it, c in zip(items, completions)]
    jobs = [{"program": p, "entry_point": it["entry_point"], "calls": [t["args"] for t in it["tests"]]} for p, it in zip(programs, items)]
    outputs = run_programs(jobs)
    solved = [compare(o, [t["expected"] for t in it["tests"]]) == len(it["tests"]) for o, it in zip(outputs, items)]
    return [parses(p) for p in programs], solved


def percent(flags):
    return round(100.0 * sum(flags) / len(flags), 1) if flags else None


def by_kind(items, solved):
    return {k: percent([s for it, s in zip(items, solved) if family_kind(it) == k]) for k in KINDS}


def calibrate(checkpoint_dir, data_file, greedy_problems=GREEDY_PROBLEMS, sampled_problems=SAMPLED_PROBLEMS, seed=SEED):
    """The figures as a dict of percentages; the problems are a seeded sample of data_file."""
    torch.set_num_threads(1)
    model = checkpoint.load(checkpoint_dir)
    items = data.read_jsonl(data_file)
    chosen = random.Random(seed).sample(items, max(greedy_problems, sampled_problems))

    greedy_items = chosen[:greedy_problems]
    greedy = generate(model, [format_prompt(it) for it in greedy_items], max_new_tokens=64)
    greedy_parses, greedy_solved = score(greedy_items, greedy)

    sampled_items = [it for it in chosen[:sampled_problems] for _ in range(SAMPLES_PER_PROBLEM)]
    sampled = generate(model, [format_prompt(it) for it in sampled_items], max_new_tokens=64, temperature=1.0, seed=seed)
    sampled_parses, sampled_solved = score(sampled_items, sampled)
    groups = [sampled_solved[i : i + SAMPLES_PER_PROBLEM] for i in range(0, len(sampled_solved), SAMPLES_PER_PROBLEM)]

    return {
        "greedy": {
            "problems": len(greedy_items),
            "pass": percent(greedy_solved),
            "parses": percent(greedy_parses),
            "pass_by_kind": by_kind(greedy_items, greedy_solved),
        },
        "sampled": {
            "temperature": 1.0,
            "episodes": len(sampled_items),
            "pass": percent(sampled_solved),
            "parses": percent(sampled_parses),
            "pass_by_kind": by_kind(sampled_items, sampled_solved),
            # Groups with at least one pass: the prompts where a reward-only learner has something to learn from.
            "groups_with_a_pass": percent([any(g) for g in groups]),
        },
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=os.path.join(HERE, "model"))
    parser.add_argument("--data", default=os.path.join(HERE, "data", "train.jsonl"))
    args = parser.parse_args()
    print(json.dumps(calibrate(args.checkpoint, args.data), indent=1))


if __name__ == "__main__":
    main()
