"""Golden tests of hflm.humaneval on hand-written problems in openai_humaneval's format.

    .venv-full/bin/python tasks/hflm-tests/test_humaneval.py
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm

from hflm import humaneval  # noqa: E402

PROBLEM = {
    "task_id": "Golden/0",
    "prompt": 'from typing import List\n\n\ndef add_all(xs: List[int], k: int) -> List[int]:\n'
              '    """Add k to every element of xs.\n    >>> add_all([1, 2], 3)\n    [4, 5]\n    """\n',
    "canonical_solution": "    return [x + k for x in xs]\n",
    "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([1, 2], 3) == [4, 5]\n"
            "    assert candidate([], 7) == []\n    assert candidate([-1], 1) == [0]\n",
    "entry_point": "add_all",
}
RIGHT = "def add_all(xs, k):\n    return [x + k for x in xs]\n"
WRONG = "def add_all(xs, k):\n    return xs\n"


def passes(completion):
    return humaneval.run_program(humaneval.build_program(PROBLEM, humaneval.extract_code(completion)))


class Prompt(unittest.TestCase):
    def test_one_user_message_instruction_then_prompt(self):
        self.assertEqual(humaneval.messages(PROBLEM), [{
            "role": "user",
            "content": "Read the following function signature and docstring, and fully implement the function "
                       "described. Your response should only contain the code for this function.\n" + PROBLEM["prompt"],
        }])
        self.assertEqual((humaneval.GENERATION.temperature, humaneval.GENERATION.chat_template), (0.0, True))


class Extraction(unittest.TestCase):
    def test_the_first_fenced_block(self):
        self.assertEqual(humaneval.extract_code(f"Here it is:\n```python\n{RIGHT}```\nDone."), RIGHT)
        self.assertEqual(humaneval.extract_code(f"```\n{RIGHT}```"), RIGHT)
        self.assertEqual(humaneval.extract_code(f"```python\n{WRONG}```\nor\n```python\n{RIGHT}```"), WRONG)

    def test_without_a_fence_the_raw_text_left_stripped(self):
        # The reasoning post-processor strips both ends first, so the trailing newline goes too.
        self.assertEqual(humaneval.extract_code("\n\n  " + RIGHT), RIGHT.rstrip())
        # A fence whose language word is not followed by a newline is no block.
        self.assertEqual(humaneval.extract_code("```python def f(): pass```"), "```python def f(): pass```")

    def test_think_sections_are_removed_before_the_fence_is_found(self):
        self.assertEqual(humaneval.extract_code(f"<think>```python\n{WRONG}```</think>```python\n{RIGHT}```"), RIGHT)


class Program(unittest.TestCase):
    def test_prompt_code_test_and_the_check_call(self):
        program = humaneval.build_program(PROBLEM, RIGHT)
        self.assertEqual(program, PROBLEM["prompt"] + RIGHT + "\n" + PROBLEM["test"] + "\ncheck(add_all)")

    def test_a_problem_without_its_fields_is_refused(self):
        with self.assertRaisesRegex(ValueError, "entry_point"):
            humaneval.build_program({"prompt": "", "test": ""}, RIGHT)


class Execution(unittest.TestCase):
    def test_the_canonical_solution_passes(self):
        self.assertTrue(humaneval.run_program(humaneval.build_program(PROBLEM, PROBLEM["canonical_solution"])))

    def test_an_empty_body_fails(self):
        self.assertFalse(humaneval.run_program(humaneval.build_program(PROBLEM, "")))

    def test_fenced_unfenced_and_several_fences(self):
        self.assertTrue(passes(f"Sure!\n```python\n{RIGHT}```"))
        self.assertTrue(passes(RIGHT))
        self.assertFalse(passes(f"```python\n{WRONG}```\n```python\n{RIGHT}```"))
        self.assertTrue(passes(f"```python\n{RIGHT}```\n```python\n{WRONG}```"))

    def test_an_indented_body_alone_fails_as_in_the_reference(self):
        # The left strip takes the first line's indentation: "return ..." lands outside the function.
        self.assertFalse(passes(PROBLEM["canonical_solution"]))

    def test_exiting_early_is_a_failure(self):
        self.assertFalse(passes("import sys\nsys.exit(0)\n"))
        self.assertFalse(passes("import os\nos._exit(0)\n"))

    def test_a_main_block_does_not_run_as_in_the_reference(self):
        self.assertTrue(passes(RIGHT + "\nif __name__ == '__main__':\n    print(add_all(input(), 1))\n"))

    def test_the_program_output_does_not_count(self):
        self.assertFalse(passes(f"print('{humaneval.PASSED}')\nraise ValueError\n"))

    def test_a_program_that_runs_too_long_fails_in_time(self):
        program = humaneval.build_program(PROBLEM, "def add_all(xs, k):\n    while True:\n        pass\n")
        # No wall-clock bound here (it would depend on the machine's speed): run_program returning at all is the
        # check, since a runner without its timeout would hang until the suite's own timeout fails it.
        self.assertFalse(humaneval.run_program(program, timeout_s=0.5))


if __name__ == "__main__":
    unittest.main()
