"""The prompt format and program assembly shared by the grader, the rollouts and every trained model."""


def format_prompt(item):
    """The text the model is given: the item's "prompt", a signature and a one-line docstring.

        def add_seven(x):
            \"\"\"Return x plus 7.\"\"\"

    It ends with a newline; the model continues with the indented body.
    """
    return item["prompt"]


def format_completion(item):
    """The text the model should write after the prompt (generation then stops at EOS).

    It is the item's canonical solution as is: the indented body ending with a newline,
    e.g. "    return x + 7\\n".
    """
    return item["canonical_solution"]


def truncate_completion(completion):
    """The part of a completion that belongs to the function body.

    The completion is cut just before its first line (lines end at "\\n") that is not
    blank (whitespace only) and does not start with a space or a tab: a new top-level
    statement (another def, a print, a stray test...) ends the function, as HumanEval's
    stop sequences do. Everything before that line, blank lines included, is kept.

        "    return x + 7\\ndef g():\\n    pass" -> "    return x + 7\\n"
        "return x + 7"                           -> ""  (not indented: the body stays empty)
    """
    start = 0
    while start < len(completion):
        end = completion.find("\n", start)
        end = len(completion) if end < 0 else end + 1
        line = completion[start:end]
        if line.strip() and not line.startswith((" ", "\t")):
            return completion[:start]
        start = end
    return completion


def build_program(prompt, completion):
    """The program that is run and tested: prompt + truncate_completion(completion)."""
    return prompt + truncate_completion(completion)
