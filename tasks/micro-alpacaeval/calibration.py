"""What the base model gets right on training instructions, greedy and sampled: the figures instructions.md states.

    PYTHONPATH=<dir holding microlm and micro_alpacaeval> python3 calibration.py [--checkpoint model]

Prints one JSON object: greedy and temperature-1 rates (128 new tokens, as graded and as
launch_rollouts samples) of responses that beat their training reference under the rubric
judge (reward 1, a win in both orders), tie with it (reward 0.5), obey all their
constraints, and end with EOS; the share of constraints obeyed; and, sampled, the share of
groups of 8 with at least one win. Seeded and single-threaded, so the same checkpoint gives
the same figures; tests/test_micro_alpacaeval.py recomputes them to check what
instructions.md says.
"""

import argparse
import json
import os
import random
import sys

# One thread in every pool, before torch loads: sampled completions then do not depend on the core count.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402

from microlm import checkpoint, data, generate  # noqa: E402
from micro_alpacaeval import constraints, format_prompt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "grader"))
import judge  # noqa: E402  (the rubric that launch_rollouts rewards with)

GREEDY_ITEMS = 200
SAMPLED_ITEMS = 50
SAMPLES_PER_ITEM = 8  # a launch_rollouts group
MAX_NEW_TOKENS = 128
SEED = 0


def reward(item, response):
    """launch_rollouts' reward: the rubric's verdict against the reference, averaged over both orders (symmetric)."""
    verdict = judge.judge({"id": "", "instruction": item["instruction"], "constraints": item["constraints"], "output_a": response, "output_b": item["reference"]})
    return {"a": 1.0, "tie": 0.5, "b": 0.0}[verdict["preference"]]


def percent(flags):
    return round(100.0 * sum(flags) / len(flags), 1) if flags else None


def figures(items, responses, stopped):
    rewards = [reward(it, r) for it, r in zip(items, responses)]
    return {
        "wins": percent([r == 1.0 for r in rewards]),
        "ties": percent([r == 0.5 for r in rewards]),
        "all_obeyed": percent([not constraints.failed(it["constraints"], r) for it, r in zip(items, responses)]),
        "constraints_obeyed": round(
            100.0 * sum(constraints.satisfied(it["constraints"], r) for it, r in zip(items, responses)) / sum(len(it["constraints"]) for it in items), 1
        ),
        "stops": percent(stopped),
    }, rewards


def run(model, items, temperature, seed):
    """Responses as the grader cuts them, and whether each ended with EOS (fewer than MAX_NEW_TOKENS tokens)."""
    prompts = [format_prompt(it["instruction"]) for it in items]
    responses = generate(model, prompts, max_new_tokens=MAX_NEW_TOKENS, temperature=temperature, seed=seed)
    return responses, [len(r) < MAX_NEW_TOKENS for r in responses]


def calibrate(checkpoint_dir, data_file, greedy_items=GREEDY_ITEMS, sampled_items=SAMPLED_ITEMS, seed=SEED):
    """The figures as a dict of percentages; the instructions are a seeded sample of data_file."""
    torch.set_num_threads(1)
    model = checkpoint.load(checkpoint_dir)
    chosen = random.Random(seed).sample(data.read_jsonl(data_file), max(greedy_items, sampled_items))

    greedy, _ = figures(chosen[:greedy_items], *run(model, chosen[:greedy_items], 0.0, None))

    sampled_list = [it for it in chosen[:sampled_items] for _ in range(SAMPLES_PER_ITEM)]
    sampled, rewards = figures(sampled_list, *run(model, sampled_list, 1.0, seed))
    groups = [rewards[i : i + SAMPLES_PER_ITEM] for i in range(0, len(rewards), SAMPLES_PER_ITEM)]
    # Groups with at least one win: the instructions where a reward-only learner has something to imitate.
    sampled["groups_with_a_win"] = percent([max(g) == 1.0 for g in groups])
    sampled["mean_reward"] = round(100.0 * sum(rewards) / len(rewards), 1)
    greedy["items"] = len(chosen[:greedy_items])
    sampled["episodes"] = len(sampled_list)
    return {"greedy": greedy, "sampled": sampled}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=os.path.join(HERE, "model"))
    parser.add_argument("--data", default=os.path.join(HERE, "data", "train.jsonl"))
    args = parser.parse_args()
    print(json.dumps(calibrate(args.checkpoint, args.data), indent=1))


if __name__ == "__main__":
    main()
