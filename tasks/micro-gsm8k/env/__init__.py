"""micro_gsm8k: prompt format, reward and rollouts of the micro-gsm8k task.

    from micro_gsm8k import format_prompt, format_completion, extract_answer, reward

A training item is {"question": ..., "answer": "23 + 18 = 41\\n#### 41"}. The model
sees format_prompt(question) and must write the answer text, then EOS; the grader
checks the integer after the last "####" of the greedy completion.
"""

from .prompt import format_completion, format_prompt
from .reward import extract_answer, reward

__all__ = ["format_prompt", "format_completion", "extract_answer", "reward"]
