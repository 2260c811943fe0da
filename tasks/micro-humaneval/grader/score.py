"""Score a micro-humaneval checkpoint locally: grading phase 1 and phase 2 in one process.

    PYTHONPATH=<dir holding microlm and micro_humaneval> python3 score.py \\
        --checkpoint DIR --eval-dir DIR [--out FILE.json] [--details FILE.jsonl] [--workers 2]

Not used by the server, which runs phase 1 (generate.py) and then each program in a
sandbox of its own. This runs the same phase 1, runs every program with
micro_humaneval.execute.run_programs (the same runner, in resource-limited
processes) and compares the outputs with the expected values. Prints, and writes
to --out when given:

    {"public": {"score": 100 * passed / total, "passed": ..., "total": ...}, "private": {...}}

where passed counts the problems whose every test passed (pass@1, greedy).
--details writes each problem's record with its outputs and "passed" added.
Exit status 2 for an invalid checkpoint, like generate.py.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import generate as phase1  # noqa: E402  (pins the thread pools before torch loads)

import torch  # noqa: E402

from micro_humaneval.execute import compare, run_programs  # noqa: E402


def score(records, workers=2):
    """Run and compare the phase-1 records; returns ({split: {score, passed, total}}, per-record outputs)."""
    outputs = run_programs(records, workers=workers)
    result = {}
    for split in phase1.SPLITS:
        rows = [(r, o) for r, o in zip(records, outputs) if r["split"] == split]
        passed = sum(compare(o, r["expected"]) == len(r["expected"]) for r, o in rows)
        result[split] = {"score": round(100.0 * passed / len(rows), 2), "passed": passed, "total": len(rows)}
    return result, outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (config.json + model.pt)")
    parser.add_argument("--eval-dir", required=True, help="directory with public.jsonl and private.jsonl")
    parser.add_argument("--out", help="where to write the scores (JSON)")
    parser.add_argument("--details", help="where to write every problem's program and outputs (JSONL)")
    parser.add_argument("--workers", type=int, default=2, help="programs run at the same time")
    args = parser.parse_args()

    torch.set_num_threads(1)
    model = phase1.load_or_exit(args.checkpoint)
    records = phase1.programs(model, args.eval_dir)
    start = time.time()
    result, outputs = score(records, args.workers)
    print(f"ran {len(records)} programs in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    if args.details:
        with open(args.details, "w") as f:
            for record, out in zip(records, outputs):
                passed = compare(out, record["expected"])
                f.write(json.dumps(dict(record, outputs=out, passed=passed)) + "\n")
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
