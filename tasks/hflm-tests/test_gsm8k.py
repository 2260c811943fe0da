"""Golden tests of hflm.gsm8k against the reference (OpenCompass gsm8k_gen_1d7fe4 and its post-processors).

    .venv-full/bin/python tasks/hflm-tests/test_gsm8k.py
"""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm

from hflm import gsm8k  # noqa: E402


class Prompt(unittest.TestCase):
    def test_the_message_list_is_the_references_item_for_item(self):
        with open(os.path.join(HERE, "golden", "gsm8k_gen_1d7fe4_messages.json")) as f:
            golden = json.load(f)
        built = gsm8k.messages(golden["question"])
        self.assertEqual(len(built), 9)
        for i, (ours, theirs) in enumerate(zip(built, golden["messages"])):
            self.assertEqual(ours, theirs, f"message {i}")
        self.assertEqual(built, golden["messages"])

    def test_generation_is_greedy_with_512_new_tokens_and_the_chat_template(self):
        g = gsm8k.GENERATION
        self.assertEqual((g.max_new_tokens, g.temperature, g.top_p, g.chat_template, g.stop), (512, 0.0, 1.0, True, ()))


class Extraction(unittest.TestCase):
    def test_the_last_number_is_the_answer(self):
        self.assertEqual(gsm8k.extract_answer("48 / 2 = 24 in May\n48 + 24 = 72\nThe answer is 72\n"), "72")

    def test_negative_and_decimal_numbers(self):
        self.assertEqual(gsm8k.extract_answer("It drops to -4 degrees"), "-4")
        self.assertEqual(gsm8k.extract_answer("Each costs $2.50"), "2.50")
        self.assertEqual(gsm8k.extract_answer("The answer is -0.75."), "-0.75")
        # A minus sign after a digit still belongs to the next number, as the pattern reads it.
        self.assertEqual(gsm8k.extract_answer("5-3"), "-3")

    def test_a_trailing_full_stop_is_not_a_decimal(self):
        self.assertEqual(gsm8k.extract_answer("So she has 12."), "12")

    def test_commas_split_a_number_in_the_prediction(self):
        # The pattern has no thousands separator: "1,000" reads as "1" then "000".
        self.assertEqual(gsm8k.extract_answer("The answer is 1,000"), "000")
        self.assertFalse(gsm8k.is_correct("000", "1000"))

    def test_think_sections_are_removed_first(self):
        self.assertEqual(gsm8k.extract_answer("<think>maybe 5, or 6</think>The answer is 7"), "7")
        self.assertEqual(gsm8k.extract_answer("<think>a 1</think>b 2<think>c 3</think>"), "2")
        # Only a closing tag: what follows the last one.
        self.assertEqual(gsm8k.extract_answer("so 8 then 9</think> The answer is 10</think>"), None)
        self.assertEqual(gsm8k.extract_answer("so 8 then 9</think> The answer is 10"), "10")
        # An unclosed <think> removes nothing.
        self.assertEqual(gsm8k.extract_answer("<think>it is 3"), "3")

    def test_text_from_question_on_is_ignored(self):
        completion = "The answer is 18\n\nQuestion: Tom has 3 apples and eats 1. How many are left?\nAnswer: 2"
        self.assertEqual(gsm8k.extract_answer(completion), "18")
        self.assertEqual(gsm8k.extract_answer("Question: 5 apples"), None)

    def test_no_number_is_no_prediction(self):
        self.assertIsNone(gsm8k.extract_answer("I cannot tell."))
        self.assertIsNone(gsm8k.extract_answer(""))
        self.assertFalse(gsm8k.is_correct(None, "3"))


class Reference(unittest.TestCase):
    def test_the_text_after_the_hashes_without_commas(self):
        self.assertEqual(gsm8k.reference_answer("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72"), "72")
        self.assertEqual(gsm8k.reference_answer("...\n#### 1,234,567"), "1234567")
        self.assertEqual(gsm8k.reference_answer("...\n#### -5"), "-5")

    def test_an_answer_without_hashes_is_refused(self):
        with self.assertRaisesRegex(ValueError, "####"):
            gsm8k.reference_answer("The answer is 5")


class Correctness(unittest.TestCase):
    def test_equal_text(self):
        self.assertTrue(gsm8k.is_correct("72", "72"))
        self.assertTrue(gsm8k.is_correct("-5", "-5"))

    def test_numerically_equal_within_1e_6_of_an_integer_reference(self):
        self.assertTrue(gsm8k.is_correct("72.0", "72"))
        self.assertTrue(gsm8k.is_correct("72.0000001", "72"))  # off by 1e-7
        self.assertFalse(gsm8k.is_correct("72.00001", "72"))  # off by 1e-5
        self.assertFalse(gsm8k.is_correct("71", "72"))

    def test_a_non_integer_reference_matches_only_as_text(self):
        self.assertTrue(gsm8k.is_correct("2.5", "2.5"))
        self.assertFalse(gsm8k.is_correct("2.50", "2.5"))  # int("2.5") fails in the reference too

    def test_score_is_accuracy_times_100(self):
        completions = ["The answer is 72", "<think>72</think>The answer is 71", "The answer is 1,234", "no idea"]
        answers = ["#### 72", "#### 72", "#### 1,234", "#### 0"]
        self.assertEqual(gsm8k.score(completions, answers), 25.0)

    def test_mismatched_lengths_are_refused(self):
        with self.assertRaisesRegex(ValueError, "one completion per problem"):
            gsm8k.score(["1"], ["#### 1", "#### 2"])


if __name__ == "__main__":
    unittest.main()
