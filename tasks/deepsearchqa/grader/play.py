"""Phase one of grading deepsearchqa: the submission plays the hidden questions as the reference's ReAct agent.

    PYTHONPATH=<dir holding hflm and a2rl_search> A2RL_SEARCH_SOCKET=<the grading's socket> <.venv-full>/bin/python \\
        play.py --checkpoint DIR --base DIR [--base-id ORG/NAME] --eval-dir DIR --out FILE.jsonl

The checkpoint is a submitted folder: a full Hugging Face model or a PEFT LoRA adapter of the run's base model
(--base). hflm.submission checks it and writes the full model folder graded (an adapter merged) beside --out; a
refused folder exits with status 2 and "invalid checkpoint: [code] message" on stderr, writing nothing. Every
question of EVAL_DIR/public.jsonl and private.jsonl ({"id", "question", "answer", "answer_type", ...}, as `a2rl
prepare deepsearchqa` writes them) is played by hflm.deepsearchqa's loop (the reference's prompt, at most 6 steps,
greedy, a 4k context; vLLM on a GPU, else transformers on one CPU thread), both halves in one batch, its searches
through the grading's own search channel (the server's provider and cache; a failed search fails the grading).
Writes one line per question, public first:
    {"id", "split", "answer_type", "gold", "predicted", "string_match", "steps", "searches", "ended"}
The server's `answers` kind then has its LLM judge say correct or incorrect for each (the reference's prompt), the
grader's string match standing in where the judge could not be asked, and scores each half by the share correct.
"""

import functools
import json
import os
import sys

from hflm import grading  # first: it pins the thread pools before torch loads
from hflm import deepsearchqa

FIELDS = ("id", "question", "answer", "answer_type")


def read_split(eval_dir, split):
    path = os.path.join(eval_dir, f"{split}.jsonl")
    rows = grading.read_split(eval_dir, split)
    for i, row in enumerate(rows):
        missing = [k for k in FIELDS if not isinstance(row.get(k), str)]
        if missing:
            sys.exit(f"{path}: row {i} lacks {', '.join(missing)}; prepare the assets again (a2rl prepare deepsearchqa)")
    return rows


def main(argv=None):
    args = grading.parse(__doc__, "where to write the answers (JSONL)", argv)
    if not os.environ.get("A2RL_SEARCH_SOCKET"):
        sys.exit("grading failed: no search channel (A2RL_SEARCH_SOCKET is unset); the server gives each grading of "
                 "deepsearchqa one: serve it with --search")
    model_dir = grading.open_submission(args, "grading")
    if model_dir is None:
        return 2
    splits = {split: read_split(args.eval_dir, split) for split in grading.SPLITS}
    search = functools.partial(deepsearchqa.channel_search, strict=True)

    def complete(rows):
        policy = deepsearchqa.Policy(model_dir)
        try:
            return deepsearchqa.play(rows, policy, search)
        finally:
            policy.close()

    episodes = grading.per_split(splits, complete)
    with open(args.out, "w", encoding="utf-8") as out:
        for split in grading.SPLITS:
            for row, episode in zip(splits[split], episodes[split]):
                line = {"id": row["id"], "split": split, "answer_type": row["answer_type"], "gold": row["answer"],
                        "predicted": episode["predicted"],
                        "string_match": deepsearchqa.string_match(episode["predicted"], row["answer"], row["answer_type"]),
                        "steps": episode["steps"], "searches": len(episode["searches"]), "ended": episode["ended"]}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
