"""micro_gsm8k: prompt format, reward and rollouts of the micro-gsm8k task.

    from micro_gsm8k import format_prompt, format_completion, extract_answer, reward

A training item is {"question": ..., "answer": "14 + 7 = 21\\n#### 21"}. The model
sees format_prompt(question) and must write the answer text, then EOS; the grader
checks the integer after the last "####" of the greedy completion (at most 32
new tokens). Sample and score completions of training prompts with

    python3 -m micro_gsm8k.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 64 --out FILE
"""

from .prompt import format_completion, format_prompt
from .reward import extract_answer, reward

__all__ = ["format_prompt", "format_completion", "extract_answer", "reward"]
