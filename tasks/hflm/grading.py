"""What every full-tier grader entry shares: the server's calling convention and the submission made gradable.

    from hflm import grading      # first, before anything loads torch: it pins the CPU thread pools
    args = grading.parse(__doc__, "where to write the scores (JSON)")
    model_dir = grading.open_submission(args, "grading")     # None: refused, said on stderr; exit 2
    splits = {split: grading.read_split(args.eval_dir, split) for split in grading.SPLITS}
    outputs = grading.per_split(splits, complete)   # complete(rows) called once: one vLLM engine per grading

The server runs `grader/<entry> --checkpoint DIR --base DIR --base-id ORG/NAME --eval-dir DIR --out FILE`
(src/grading/grader.ts with the task's gradingInputs). The checkpoint is a full model or a LoRA adapter of the
base; open_submission checks it with hflm.submission and writes the full model graded beside --out.
"""

import argparse
import json
import os
import sys
import time

from . import gpu

# One thread in every CPU pool before torch loads: the CPU backend's results then do not depend on the
# machine's core count (on a GPU, vLLM's kernels decide).
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the grading sandbox has no network: never try the hub
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

SPLITS = ("public", "private")


def parse(doc, out_help, argv=None):
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the submitted folder (full model or LoRA adapter)")
    parser.add_argument("--base", required=True, help="the run's base model folder")
    parser.add_argument("--base-id", help="the base model's hub id, e.g. Qwen/Qwen2.5-1.5B-Instruct")
    parser.add_argument("--eval-dir", required=True, help="directory with public.jsonl and private.jsonl")
    parser.add_argument("--out", required=True, help=out_help)
    return parser.parse_args(argv)


def read_split(eval_dir, split):
    with open(os.path.join(eval_dir, f"{split}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def open_submission(args, doing):
    """The graded model folder (an adapter merged onto --base), on one torch thread; None when the submission is
    refused, with "invalid checkpoint: [code] message" on stderr."""
    import torch

    from .submission import SubmissionError, materialise

    torch.set_num_threads(1)
    model_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "graded-model")
    try:
        # The sandbox keeps the checkpoint mounted, read-only, for the whole grading: a full model is linked, not copied.
        inspection = materialise(args.checkpoint, args.base, model_dir, args.base_id, link_weights=True)
    except SubmissionError as e:
        print(f"invalid checkpoint: [{e.code}] {e}", file=sys.stderr)
        return None
    print(f"{doing} a {inspection.kind} submission ({', '.join(inspection.notes) or 'as submitted'})", file=sys.stderr)
    return model_dir


def gpu_failure(reason):
    """Ends a grading that cannot decode on its GPU (it cannot use one, or ran out of its memory) with the reason as
    the last line of its log, which the server shows in get_score, a failed baseline's too: exit status 3."""
    print(f"grading failed: {reason}", file=sys.stderr, flush=True)
    sys.exit(3)


def per_split(rows_by_split, complete):
    """complete(rows) -> one output per row, called once on the rows of every split together (one vLLM engine per
    grading: a second engine costs its start-up and CUDA graphs again, and beside a live one can run out of memory);
    returns {split: its rows' outputs}, in order."""
    everything = [row for rows in rows_by_split.values() for row in rows]
    start = time.time()
    try:
        outputs = complete(everything)
    except gpu.GpuUnavailable as e:
        gpu_failure(f"GPU unavailable: {e}")
    except Exception as e:
        import torch

        if not isinstance(e, torch.OutOfMemoryError):
            raise
        gpu_failure(f"out of GPU memory while decoding ({e}); grade on a GPU with more memory (serve --gpus), "
                    "or free the GPU of other processes")
    if len(outputs) != len(everything):
        raise ValueError(f"complete returned {len(outputs)} outputs for {len(everything)} rows")
    print(f"{len(everything)} outputs ({', '.join(f'{s} {len(r)}' for s, r in rows_by_split.items())}) in "
          f"{time.time() - start:.1f}s", file=sys.stderr, flush=True)
    by_split, first = {}, 0
    for split, rows in rows_by_split.items():
        by_split[split], first = outputs[first : first + len(rows)], first + len(rows)
    return by_split
