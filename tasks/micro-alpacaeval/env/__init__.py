"""micro_alpacaeval: prompt format, constraint checkers and rollouts of the micro-alpacaeval task.

    from micro_alpacaeval import format_prompt, format_completion, constraints

A training item is {"id", "instruction", "constraints", "reference"}. The model sees
format_prompt(instruction) and must write its response, then EOS; the grader
decodes greedily (at most 128 new tokens) and a judge compares each response with
the item's reference. The constraint checkers the judge uses are in
micro_alpacaeval.constraints, its word list in micro_alpacaeval.lexicon. Sample
completions of training prompts (the server judges them and adds a reward) with

    python3 -m micro_alpacaeval.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 64 --out FILE
"""

from . import constraints
from .prompt import format_completion, format_prompt

__all__ = ["format_prompt", "format_completion", "constraints"]
