"""micro_example: prompt format and reward of the micro-example task (the template; rename the package).

The agent sees this package, read-only, at /workspace/lib/micro_example: put here what the agent's code,
the grader, the rollouts and the oracle share (the prompt format, the reward, for a level-3 task the
environment: make_env(), MAX_STEPS, MAX_NEW_TOKENS), and nothing that gives the task away (no expert,
no evaluation data).

    from micro_example import format_prompt, format_completion, reward

A training item is {"word": "lamp", "answer": "pmal"}. The model sees format_prompt(word) and must
write the word backwards, then EOS; the grader compares the greedy completion with the answer.
Sample and score completions of training prompts with

    python3 -m micro_example.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 64 --out FILE
"""

MAX_NEW_TOKENS = 16  # the grader's limit: the longest answer, and room to stop


def format_prompt(word):
    """The text the model is given for a word."""
    return f"Backwards: {word}\nAnswer: "


def format_completion(answer):
    """The text the model should write after the prompt (generation then stops at EOS)."""
    return answer


def reward(completion, answer):
    """1.0 when the completion is the answer (surrounding spaces ignored), else 0.0."""
    return 1.0 if completion.strip() == answer else 0.0


__all__ = ["MAX_NEW_TOKENS", "format_prompt", "format_completion", "reward"]
