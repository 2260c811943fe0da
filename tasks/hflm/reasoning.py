"""Removing a reasoning model's <think>…</think> sections before an answer is read.

The reference applies OpenCompass's `extract-non-reasoning-content` to every prediction before the
dataset's own post-processing (RD-Agent's models.yaml sets use_cot_postprocessor for every model).
Its two cases, reproduced here: with only a closing tag, what follows the last closing tag; otherwise
every complete <think>…</think> section removed. Both results are stripped of surrounding whitespace.
"""

import re

THINK_SECTION = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def strip_reasoning(text):
    if "<think>" not in text and "</think>" in text:
        return text.split("</think>")[-1].strip()
    return THINK_SECTION.sub("", text).strip()
