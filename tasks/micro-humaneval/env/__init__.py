"""micro_humaneval: prompt format, program runner and rollouts of the micro-humaneval task.

    from micro_humaneval import format_prompt, format_completion, build_program, run_tests

A training item is {"task_id", "family", "prompt", "entry_point", "canonical_solution",
"tests": [{"args": [...], "expected": ...}, ...]}. The model sees format_prompt(item)
(a signature and a docstring) and must write the indented body, then EOS. The graded
program is build_program(prompt, completion): the prompt plus the completion cut before
its first non-indented line. run_tests(program, entry_point, tests) runs it in a
separate, resource-limited process and returns the fraction of tests passed, the
rollout reward; the grader counts a problem as solved when all its tests pass.
Sample and score completions of training prompts with

    python3 -m micro_humaneval.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 64 --out FILE

`python3 -m micro_humaneval.execute ITEM.json` is the runner itself (see execute.py).
"""

from .prompt import build_program, format_completion, format_prompt, truncate_completion

__all__ = [
    "format_prompt", "format_completion", "truncate_completion", "build_program",
    "compare", "run_tests", "run_program", "run_programs",
]


def __getattr__(name):
    # Imported on first use, so that `python3 -m micro_humaneval.execute` does not load
    # execute.py twice (once as part of the package, once as the program).
    if name in ("compare", "run_tests", "run_program", "run_programs"):
        from . import execute

        return getattr(execute, name)
    raise AttributeError(f"module 'micro_humaneval' has no attribute {name!r}")
