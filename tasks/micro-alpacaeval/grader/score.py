"""Win rates of a micro-alpacaeval checkpoint against the references, with the rubric judge.

    PYTHONPATH=<dir holding microlm and micro_alpacaeval> python3 score.py \\
        --checkpoint DIR --eval-dir DIR [--responses FILE.jsonl] [--out FILE.json]

For the task's own measurements and tests; the server does not run it (it runs
generate.py, then a judge, and computes the win rates itself, the same way).
It answers the evaluation instructions as generate.py does (or reads a
generate.py output given with --responses), judges every response against its
reference in both orders (response first, then reference first) and prints
    {"public": {"win_rate", "wins", "ties", "losses", "all_met", "reference_all_met"}, "private": {...}}
win_rate = 100 * mean over items of (verdict in order 1 + verdict in order 2) / 2,
a verdict counting 1 for a win, 0.5 for a tie, 0 for a loss; wins, ties and
losses count verdicts over both orders; all_met is the percentage of responses
that satisfy all their constraints (reference_all_met: of the references).
"""

import argparse
import json
import sys

from generate import SPLITS, load_model, response_rows  # this folder's generate.py
from judge import judge

from microlm import CheckpointError
from micro_alpacaeval.constraints import failed

POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def outcome(verdict, candidate):
    """'win', 'tie' or 'loss' for the output in position candidate ("a" or "b")."""
    return "tie" if verdict["preference"] == "tie" else "win" if verdict["preference"] == candidate else "loss"


def win_rates(rows):
    """Per split: the win rate of rows' responses against their references (see the module docstring)."""
    result = {}
    for split in SPLITS:
        selected = [r for r in rows if r["split"] == split]
        counts = {"win": 0, "tie": 0, "loss": 0}
        points = 0.0
        for r in selected:
            base = {"id": r["id"], "instruction": r["instruction"], "constraints": r["constraints"]}
            first = judge(dict(base, output_a=r["response"], output_b=r["reference"]))
            second = judge(dict(base, output_a=r["reference"], output_b=r["response"]))
            for o in (outcome(first, "a"), outcome(second, "b")):
                counts[o] += 1
                points += POINTS[o] / 2
        n = len(selected)
        result[split] = {
            "win_rate": round(100.0 * points / n, 2),
            "wins": counts["win"], "ties": counts["tie"], "losses": counts["loss"],
            "all_met": round(100.0 * sum(not failed(r["constraints"], r["response"]) for r in selected) / n, 2),
            "reference_all_met": round(100.0 * sum(not failed(r["constraints"], r["reference"]) for r in selected) / n, 2),
            "total": n,
        }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="checkpoint directory (config.json + model.pt)")
    parser.add_argument("--eval-dir", help="directory with public.jsonl and private.jsonl")
    parser.add_argument("--responses", help="a generate.py output to judge instead of generating")
    parser.add_argument("--out", help="also write the result here (JSON)")
    args = parser.parse_args()

    if args.responses:
        with open(args.responses) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    else:
        if not (args.checkpoint and args.eval_dir):
            parser.error("give --checkpoint and --eval-dir, or --responses")
        try:
            model = load_model(args.checkpoint)
        except CheckpointError as e:
            print(f"invalid checkpoint: {e}", file=sys.stderr)
            sys.exit(2)
        rows = response_rows(model, args.eval_dir)
    result = win_rates(rows)
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
