"""The prompt format shared by the grader, the rollouts and every trained model."""


def format_prompt(question):
    """The text the model is given for a question: "Q: <question>\\nA: "."""
    return f"Q: {question}\nA: "


def format_completion(answer):
    """The text the model should write after the prompt (generation then stops at EOS).

    It is the item's answer field as is, e.g. "14 + 7 = 21\\n#### 21".
    """
    return answer
