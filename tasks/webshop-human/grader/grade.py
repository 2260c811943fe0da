"""Grade a webshop-human submission: the model shops for WebShop's own test goals (human goals 0-499) as the
reference's ReAct agent; success is reward 1, as WebShop's papers count it.

    PYTHONPATH=<dir holding hflm and web_agent_site> <.venv-full>/bin/python grade.py \\
        --checkpoint DIR --base DIR [--base-id ORG/NAME] --eval-dir DIR --out FILE.json

As tasks/webshop/grader/grade.py (the same hflm.webshop.grade), with the variant "webshop-human": the whole product
set (EVAL_DIR/webshop/data/items_shuffle.json, items_ins_v2.json, items_human_ins.json; upstream's num_products None),
human goals, the papers' test split (goals 0-499 of the env's shuffled human goals) halved public / private, and
score = 100 * the mean reward (the papers' headline), with "success_rate" (episodes with reward 1) beside it.
"""

import sys

from hflm import grading  # first: it pins the thread pools before torch loads
from hflm import webshop

GRADER_VERSION = "webshop-human-grader-2"

if __name__ == "__main__":
    sys.exit(webshop.grade(grading.parse(__doc__, "where to write the scores (JSON)"), webshop.VARIANTS["webshop-human"],
                           GRADER_VERSION))
