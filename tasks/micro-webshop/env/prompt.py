"""The prompt format shared by the grader, the rollouts and every trained model."""

MAX_NEW_TOKENS = 32  # the longest action, search[white cotton sweater], has 29 characters


def format_prompt(observation):
    """The text the policy is given for an observation: the observation, a newline and "> "."""
    return f"{observation}\n> "
