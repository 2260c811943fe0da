"""What the base model gets right on training problems, greedy and sampled: the figures instructions.md states.

    PYTHONPATH=<dir holding microlm and micro_gsm8k> python3 calibration.py [--checkpoint model]

Prints one JSON object of percentages, greedy and at temperature 1 (as launch_rollouts samples):
the worked line's form (`a + b = r` then `#### r`), both operands and the sign copied from the
question, a result consistent with the worked line, solved (the reward), and solved with the whole
worked line right (a success for the right reason, not a lucky guess). Sampled, also the
share of groups of 8 with at least one solved sample. Seeded and single-threaded, so the same
checkpoint gives the same figures; tests/test_micro_gsm8k.py recomputes them to check what
instructions.md says.
"""

import argparse
import json
import os
import random
import re

# One thread in every pool, before torch loads: sampled completions then do not depend on the core count.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402

from microlm import checkpoint, data, generate  # noqa: E402
from micro_gsm8k import format_prompt, reward  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GREEDY_PROBLEMS = 400
SAMPLED_PROBLEMS = 200
SAMPLES_PER_PROBLEM = 8  # a launch_rollouts group
MAX_NEW_TOKENS = 32  # as the grader and launch_rollouts decode
SEED = 0

WORKED = re.compile(r"(\d+) ([+-]) (\d+) = (-?\d+)\n#### (-?\d+)")


def judge(completion, answer):
    """(well formed, operands and sign copied, result consistent with the worked line, solved, solved with the
    worked line right throughout) for one completion."""
    gold = WORKED.match(answer)
    got = WORKED.match(completion)
    formed = got is not None
    copied = formed and got.group(1, 2, 3) == gold.group(1, 2, 3)
    consistent = formed and got.group(4) == got.group(5)
    solved = reward(completion, answer) == 1.0
    return formed, copied, consistent, solved, solved and copied and consistent


def rates(items, completions):
    flags = list(zip(*(judge(c, it["answer"]) for it, c in zip(items, completions))))
    names = ("well_formed", "operands_copied", "consistent", "solved", "solved_worked_line_right")
    return {name: percent(f) for name, f in zip(names, flags)}, list(flags[3])


def percent(flags):
    return round(100.0 * sum(flags) / len(flags), 1)


def calibrate(checkpoint_dir, data_file, greedy_problems=GREEDY_PROBLEMS, sampled_problems=SAMPLED_PROBLEMS, seed=SEED):
    """The figures as a dict of percentages; the problems are a seeded sample of data_file."""
    torch.set_num_threads(1)
    model = checkpoint.load(checkpoint_dir)
    items = data.read_jsonl(data_file)
    chosen = random.Random(seed).sample(items, max(greedy_problems, sampled_problems))

    greedy_items = chosen[:greedy_problems]
    greedy = generate(model, [format_prompt(it["question"]) for it in greedy_items], max_new_tokens=MAX_NEW_TOKENS)
    greedy_rates, _ = rates(greedy_items, greedy)

    sampled_items = [it for it in chosen[:sampled_problems] for _ in range(SAMPLES_PER_PROBLEM)]
    prompts = [format_prompt(it["question"]) for it in sampled_items]
    sampled = generate(model, prompts, max_new_tokens=MAX_NEW_TOKENS, temperature=1.0, seed=seed)
    sampled_rates, solved = rates(sampled_items, sampled)
    groups = [solved[i : i + SAMPLES_PER_PROBLEM] for i in range(0, len(solved), SAMPLES_PER_PROBLEM)]
    # Groups with at least one solved sample: the prompts where a reward-only learner has something to learn from.
    sampled_rates["groups_with_a_solved_sample"] = percent([any(g) for g in groups])
    return {"greedy": {"problems": len(greedy_items), **greedy_rates}, "sampled": {"episodes": len(sampled_items), **sampled_rates}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=os.path.join(HERE, "model"))
    parser.add_argument("--data", default=os.path.join(HERE, "data", "train.jsonl"))
    args = parser.parse_args()
    print(json.dumps(calibrate(args.checkpoint, args.data), indent=1))


if __name__ == "__main__":
    main()
