"""What every task's generate.py ends with: writing its three splits as JSONL, and its command line.

    from microlm import splits

    def generate():
        ...
        return train, public, private          # lists of JSON-serialisable items
        # or train, public, private, decoys: items drawn like the evaluation items, after everything else


    if __name__ == "__main__":
        splits.main(__doc__, HERE, generate)   # python3 generate.py [--out-dir DIR]

main writes DIR/data/train.jsonl (agent-visible) and DIR/eval/public.jsonl and DIR/eval/private.jsonl
(hidden), DIR defaulting to the task's folder, one item a line (keys sorted unless sort_keys=False), and
returns DIR so that the caller can write more there. A generator whose items are draws from templates also
returns decoys, as many as the evaluation items, drawn by the same code after everything else (so the other
files do not change) and disjoint from them all: main writes them to DIR/eval/decoys.jsonl, hidden like the
evaluation set and never graded. The server's contamination check looks for them as it looks for the evaluation
items, to tell an agent that saw the evaluation set from one that drew more items from the visible templates
(docs/ARCHITECTURE.md, invariant 12). A generator must be a pure function of its seed:
tasks/contract_test.py checks that a rerun rewrites the shipped files byte for byte.
"""

import argparse
import json
import os

FILES = ("data/train.jsonl", "eval/public.jsonl", "eval/private.jsonl")
DECOYS = "eval/decoys.jsonl"


def write_jsonl(path, items, sort_keys=True):
    """Write items to path as JSON lines, creating the folder."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for item in items:
            f.write(json.dumps(item, sort_keys=sort_keys) + "\n")


def main(description, task_dir, generate, noun="items", sort_keys=True, argv=None):
    """Parses --out-dir, writes generate()'s (train, public, private[, decoys]) there and returns the folder."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", default=task_dir)
    args = parser.parse_args(argv)
    train, public, private, *decoys = generate()
    for rel, items in zip(FILES + (DECOYS,), (train, public, private, *decoys)):
        write_jsonl(os.path.join(args.out_dir, rel), items, sort_keys=sort_keys)
    drawn = f", {len(decoys[0])} decoy" if decoys else ""
    print(f"wrote {len(train)} train, {len(public)} public, {len(private)} private{drawn} {noun} under {args.out_dir}")
    return args.out_dir
