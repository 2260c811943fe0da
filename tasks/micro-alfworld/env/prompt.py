"""The policy's prompt: the current observation, then a line that starts the action."""


def format_prompt(observation):
    """What the model sees before writing an action (then EOS): the observation and "\\n> "."""
    return observation + "\n> "
