"""Exact-answer reward, as the grader scores it."""

import re

_FINAL = re.compile(r"####\s*(-?\d+)")


def extract_answer(text):
    """The integer written right after the last "####" in text, or None if there is none.

    "41 + 2 = 43\\n#### 43" -> 43;  "#### 4 #### 5" -> 5;  "no answer" -> None.
    """
    matches = _FINAL.findall(text)
    return int(matches[-1]) if matches else None


def reward(completion, answer_text):
    """1.0 if the completion's final answer equals the reference's, else 0.0.

    answer_text is the item's "answer" field (worked solution ending in "#### N").
    """
    predicted, expected = extract_answer(completion), extract_answer(answer_text)
    return 1.0 if predicted is not None and predicted == expected else 0.0
