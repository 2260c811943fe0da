"""The prompt format shared by the grader, the rollouts and every trained model."""


def format_prompt(instruction):
    """The text the model is given for an instruction: "Instruction: <instruction>\\nResponse:\\n"."""
    return f"Instruction: {instruction}\nResponse:\n"


def format_completion(reference):
    """The text the model should write after the prompt (generation then stops at EOS).

    It is the item's reference field as is, e.g. "Dear Sam,\\n- The picnic is on Saturday at noon.\\n- ...".
    """
    return reference
