"""The scripted expert of micro-deepsearchqa and the habit action, used only by pretrain.py and the tests.

Kept at the task root, outside env/ (which the sandbox mounts as /workspace/lib/micro_deepsearchqa),
so the agent cannot import a policy that solves every game and clone it instead of training online.

    sys.path.insert(0, <task dir>); from expert import expert, critical
(with micro_deepsearchqa importable, e.g. the lib folder on sys.path)
"""

import re

from micro_deepsearchqa.game import QUESTION_TYPES


def parse_question(observation):
    """(task type, subject) of the question on an observation's last line, or (None, None)."""
    first = observation.rsplit("\n", 1)[-1]
    for task_type, (template, _, _, _) in QUESTION_TYPES.items():
        pre, post = template.split("{}")
        if first.startswith("Q: " + pre) and first.endswith(post):
            return task_type, first[3 + len(pre) : len(first) - len(post)]
    return None, None


def _link_after(line, rel):
    m = re.search(re.escape(rel) + r" \[(\d+)\]", line)
    return m.group(1) if m else None


def expert(observation):
    """The scripted expert: a function of the current observation that solves every game in 2 steps.

    Results (R: lines): open the link after the question's first relation in the subject's line.
    An opened document (D: line): answer with the link after the question's second relation.
    Anything else (no such link): search the subject's name."""
    task_type, subject = parse_question(observation)
    if task_type is None:
        return "search[]"
    _, _, first, second = QUESTION_TYPES[task_type]
    lines = observation.split("\n")[:-1]
    for line in lines:
        if line.startswith("D: "):
            k = _link_after(line, second)
            return f"answer[#{k}]" if k else f"search[{subject}]"
    for line in lines:
        if line.startswith(f"R: {subject}: "):
            k = _link_after(line, first)
            if k:
                return f"search[#{k}]"
    return f"search[{subject}]"


def critical(observation):
    """The habit action for a decision state (an R: or D: observation), else None."""
    first = observation.split("\n", 1)[0]
    if first.startswith("D: "):
        return "answer[#1]"
    if first.startswith("R: "):
        return "search[#1]"
    return None
