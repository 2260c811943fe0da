"""Grade a webshop submission: the model shops for the hidden goals as the reference's ReAct agent.

    PYTHONPATH=<dir holding hflm and web_agent_site> <.venv-full>/bin/python grade.py \\
        --checkpoint DIR --base DIR [--base-id ORG/NAME] --eval-dir DIR --out FILE.json

The checkpoint is a submitted folder: a full Hugging Face model or a PEFT LoRA adapter of the run's base model
(--base). hflm.submission checks it and writes the full model folder graded (an adapter merged) beside --out; a
refused folder exits with status 2 and "invalid checkpoint: [code] message" on stderr, writing no score.
EVAL_DIR holds a WebShop root with every instruction (webshop/data/items_shuffle_1000.json, items_ins_v2_1000.json,
items_human_ins.json, webshop/search_engine/…) and the evaluation goals halved (public.jsonl, private.jsonl: goal
indices of the env over that root, checked against their instruction texts). Each half is played in upstream's
WebAgentTextEnv (web_agent_site; the stand-in where the real package is not installed) with hflm.webshop's loop: the
reference's prompt and system message, at most 50 steps, greedy chat completion of at most 100 tokens cut at the first
newline (vLLM on a GPU, else transformers on one CPU thread). One engine serves both halves.

Writes {"grader_version", "variant": "webshop", "success_at": 0.5, "public": {"score", "correct", "total",
"mean_reward", "bought"}, "private": {..., "whole_score", "whole_correct", "whole_total", "whole_mean_reward"}}:
score = 100 * episodes with reward >= 0.5 / episodes (the reference's success rate). The whole-set figure (the
reference's 100 goals) is kept with the private half, which the agent never sees.
"""

import sys

from hflm import grading  # first: it pins the thread pools before torch loads
from hflm import webshop

GRADER_VERSION = "webshop-grader-1"

if __name__ == "__main__":
    sys.exit(webshop.grade(grading.parse(__doc__, "where to write the scores (JSON)"), webshop.VARIANTS["webshop"], GRADER_VERSION))
