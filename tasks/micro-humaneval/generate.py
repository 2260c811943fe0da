"""Generate the micro-humaneval data: tiny Python functions from one-line docstrings.

    PYTHONPATH=<dir holding microlm> python3 generate.py [--out-dir DIR]

Writes DIR/data/train.jsonl (agent-visible) and DIR/eval/{public,private,decoys}.jsonl
(hidden), DIR defaulting to this task's folder. Each item is HumanEval-shaped:

    {"task_id": "MicroEval/public/17", "family": "add_const",
     "prompt": "def add_seven(x):\\n    \\"\\"\\"Return x plus 7.\\"\\"\\"\\n",
     "entry_point": "add_seven", "canonical_solution": "    return x + 7\\n",
     "tests": [{"args": [3], "expected": 10}, ...]}

A problem comes from one of the FAMILIES below (integer arithmetic, booleans,
list and string functions), with a function name, a docstring wording, a
constant where the family has one, and argument names drawn at random. Its
*combination* (family, docstring wording, function name, constant) decides the
split: a fifth of each family's combinations is held out for evaluation, so an
evaluation problem is never a training problem with its arguments renamed.

Tests are input/expected-output pairs with JSON values only (int, str, bool,
list); the expected values come from running the canonical solution. Inputs
are redrawn until no other family's solution, with any constant, passes all of
a problem's tests, so passing them means writing this function.

The output is a pure function of SEED, so running it again gives byte-identical files.
"""

import os
import random

from microlm import splits

HERE = os.path.dirname(os.path.abspath(__file__))

SEED = 20240618
N_TRAIN, N_PUBLIC, N_PRIVATE = 4000, 200, 200
N_TESTS = 5
HELD_OUT = 0.2  # share of each family's combinations kept for evaluation
# The grader decodes at most 64 new tokens in a 192-token context, after BOS:
# prompts up to this length are seen whole.
MAX_PROMPT_CHARS = 192 - 64 - 1

DIGITS = list(range(2, 10))  # divisible_const starts at 3: "divisible by 2" is is_even
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
LETTERS = list("aeinorst")
SUFFIXES = ["!", "?", "s", "ed", "er", "ing"]

# Argument names by type; two-argument functions take a pair.
INT_ARGS = ["x", "n", "a", "num", "value", "k"]
INT_PAIRS = [("a", "b"), ("x", "y"), ("m", "n"), ("p", "q"), ("first", "second"), ("left", "right")]
LIST_ARGS = ["xs", "nums", "items", "values", "lst", "numbers", "data"]
LIST_INT_PAIRS = [("xs", "x"), ("nums", "n"), ("items", "target"), ("values", "value"), ("lst", "item"), ("data", "key")]
STR_ARGS = ["s", "text", "word", "string", "name", "line"]


def family(name, kind, names, docs, body, consts=None, inputs=None):
    """One problem family.

    kind:   argument types, e.g. ("int",) or ("list", "int"): picks argument names and inputs.
    names:  function-name templates; docs: docstring templates; body: the one-line solution.
            Templates use {a} and {b} for the arguments, {k} for the constant and {w}
            for the constant in words (2..9 only).
    consts: the family's constants, or None.
    inputs: inputs(rng, k) -> one argument list; defaults to random inputs of `kind`.
    """
    return {"name": name, "kind": kind, "names": names, "docs": docs, "body": body, "consts": consts, "inputs": inputs}


# ---- test inputs ------------------------------------------------------------------------


def small_int(rng):
    return rng.randint(-20, 20)


def int_list(rng, lo=-5, hi=20, min_len=2, max_len=6):
    return [rng.randint(lo, hi) for _ in range(rng.randint(min_len, max_len))]


def lower_word(rng, letters="abcdefghijklmnopqrstuvwxyz", min_len=1, max_len=8):
    return "".join(rng.choice(letters) for _ in range(rng.randint(min_len, max_len)))


def default_inputs(kind):
    make = {
        "int": small_int,
        "list": lambda rng: int_list(rng),
        "str": lambda rng: lower_word(rng),
    }
    return lambda rng, k: [make[t](rng) for t in kind]


def near(rng, k):
    """An integer close to k (the interesting side of a threshold)."""
    return k + rng.randint(-4, 4)


def multiple_or_not(rng, k):
    """A multiple of k half of the time, else a number just above one."""
    return k * rng.randint(-3, 3) + (rng.random() < 0.5) * rng.randint(1, k - 1)


def list_with(rng, k):
    """A list drawn from a few values around k, so k appears zero to several times."""
    return [rng.randint(k - 2, k + 2) for _ in range(rng.randint(2, 7))]


def list_and_member(rng, k):
    xs = int_list(rng, -5, 12)
    return [xs, rng.choice(xs) if rng.random() < 0.5 else rng.randint(-5, 12)]


def word_with(rng, c):
    """A word in which the letter c is common."""
    return lower_word(rng, c * 3 + "bdlmu")


def word_starting(rng, c):
    word = lower_word(rng, min_len=0, max_len=6)
    return c + word if rng.random() < 0.5 else word


def word_ending(rng, c):
    word = lower_word(rng, min_len=0, max_len=6)
    return word + c if rng.random() < 0.5 else word


def mixed_case_word(rng, k):
    return "".join(rng.choice("aBcDeFgHiJkLmNoPqRsTuVwXyZ") for _ in range(rng.randint(1, 8)))


# ---- families ---------------------------------------------------------------------------

FAMILIES = [
    # integer arithmetic
    family("add_const", ("int",), ["add_{w}", "plus_{w}", "add_{k}", "increase_by_{w}"],
           ["Return {a} plus {k}.", "Add {k} to {a}.", "Return {a} increased by {k}."],
           "return {a} + {k}", DIGITS),
    family("sub_const", ("int",), ["sub_{w}", "minus_{w}", "subtract_{k}", "decrease_by_{w}"],
           ["Return {a} minus {k}.", "Subtract {k} from {a}.", "Return {a} decreased by {k}."],
           "return {a} - {k}", DIGITS),
    family("mul_const", ("int",), ["times_{w}", "mul_{w}", "multiply_by_{k}", "scale_by_{w}"],
           ["Return {a} times {k}.", "Multiply {a} by {k}.", "Return {a} multiplied by {k}."],
           "return {a} * {k}", DIGITS),
    family("mod_const", ("int",), ["mod_{w}", "remainder_{k}", "modulo_{w}"],
           ["Return the remainder of {a} divided by {k}.", "Return {a} modulo {k}."],
           "return {a} % {k}", DIGITS),
    family("floordiv_const", ("int",), ["div_{w}", "floor_div_{k}", "quotient_{w}"],
           ["Return {a} divided by {k}, rounded down.", "Return the integer quotient of {a} and {k}."],
           "return {a} // {k}", DIGITS),
    family("abs", ("int",), ["absolute", "abs_value", "magnitude", "distance_from_zero"],
           ["Return the absolute value of {a}.", "Return {a} without its sign."],
           "return abs({a})"),
    family("square", ("int",), ["square", "squared", "self_product"],
           ["Return {a} squared.", "Return {a} multiplied by itself."],
           "return {a} * {a}"),
    family("negate", ("int",), ["negate", "negative", "flip_sign"],
           ["Return the negative of {a}.", "Return {a} with its sign flipped."],
           "return -{a}"),
    family("add2", ("int", "int"), ["add", "total", "sum_two", "combine"],
           ["Return the sum of {a} and {b}.", "Add {a} and {b}."],
           "return {a} + {b}"),
    family("sub2", ("int", "int"), ["subtract", "difference", "minus", "take_away"],
           ["Return {a} minus {b}.", "Subtract {b} from {a}."],
           "return {a} - {b}"),
    family("mul2", ("int", "int"), ["multiply", "product", "times", "mul"],
           ["Return the product of {a} and {b}.", "Multiply {a} by {b}."],
           "return {a} * {b}"),
    family("max2", ("int", "int"), ["larger", "bigger", "max_of_two", "maximum"],
           ["Return the larger of {a} and {b}.", "Return the maximum of {a} and {b}."],
           "return max({a}, {b})"),
    family("min2", ("int", "int"), ["smaller", "lesser", "min_of_two", "minimum"],
           ["Return the smaller of {a} and {b}.", "Return the minimum of {a} and {b}."],
           "return min({a}, {b})"),
    # booleans
    family("is_even", ("int",), ["is_even", "even", "check_even"],
           ["Return True if {a} is even, else False.", "Check whether {a} is even."],
           "return {a} % 2 == 0"),
    family("is_odd", ("int",), ["is_odd", "odd", "check_odd"],
           ["Return True if {a} is odd, else False.", "Check whether {a} is odd."],
           "return {a} % 2 == 1"),
    family("is_positive", ("int",), ["is_positive", "positive", "above_zero"],
           ["Return True if {a} is greater than zero.", "Check whether {a} is positive."],
           "return {a} > 0"),
    family("is_negative", ("int",), ["is_negative", "negative_check", "below_zero"],
           ["Return True if {a} is less than zero.", "Check whether {a} is negative."],
           "return {a} < 0"),
    family("greater_const", ("int",), ["greater_than_{w}", "above_{k}", "exceeds_{w}", "is_over_{k}"],
           ["Return True if {a} is greater than {k}.", "Check whether {a} is more than {k}."],
           "return {a} > {k}", DIGITS, lambda rng, k: [near(rng, k)]),
    family("less_const", ("int",), ["less_than_{w}", "below_{k}", "is_under_{w}", "under_{k}"],
           ["Return True if {a} is less than {k}.", "Check whether {a} is smaller than {k}."],
           "return {a} < {k}", DIGITS, lambda rng, k: [near(rng, k)]),
    family("equals_const", ("int",), ["equals_{w}", "is_{w}", "is_equal_to_{k}"],
           ["Return True if {a} equals {k}.", "Check whether {a} is exactly {k}."],
           "return {a} == {k}", DIGITS, lambda rng, k: [k if rng.random() < 0.4 else small_int(rng)]),
    family("divisible_const", ("int",), ["divisible_by_{w}", "multiple_of_{k}", "is_multiple_of_{w}"],
           ["Return True if {a} is divisible by {k}.", "Check whether {a} is a multiple of {k}."],
           "return {a} % {k} == 0", DIGITS[1:], lambda rng, k: [multiple_or_not(rng, k)]),
    family("greater2", ("int", "int"), ["is_greater", "greater", "beats", "first_wins"],
           ["Return True if {a} is greater than {b}.", "Check whether {a} is larger than {b}."],
           "return {a} > {b}"),
    # lists
    family("list_sum", ("list",), ["total", "sum_list", "add_all", "list_sum"],
           ["Return the sum of the numbers in {a}.", "Add up all elements of {a}."],
           "return sum({a})"),
    family("list_len", ("list",), ["length", "count_items", "size", "list_length"],
           ["Return the number of elements in {a}.", "Return how many items {a} has."],
           "return len({a})", None, lambda rng, k: [int_list(rng, max_len=9)]),
    family("list_max", ("list",), ["largest", "list_max", "biggest", "find_max"],
           ["Return the largest element of {a}.", "Return the maximum value in {a}."],
           "return max({a})"),
    family("list_min", ("list",), ["smallest", "list_min", "lowest", "find_min"],
           ["Return the smallest element of {a}.", "Return the minimum value in {a}."],
           "return min({a})"),
    family("list_first", ("list",), ["first", "head", "first_item", "get_first"],
           ["Return the first element of {a}.", "Return the element at the start of {a}."],
           "return {a}[0]"),
    family("list_last", ("list",), ["last", "tail_item", "last_item", "get_last"],
           ["Return the last element of {a}.", "Return the element at the end of {a}."],
           "return {a}[-1]"),
    family("list_reverse", ("list",), ["reverse", "reversed_list", "backwards", "flip"],
           ["Return {a} in reverse order.", "Return the elements of {a} from last to first."],
           "return {a}[::-1]"),
    family("list_sorted", ("list",), ["sort_list", "ascending", "in_order", "sorted_copy"],
           ["Return {a} sorted in increasing order.", "Return the elements of {a} from smallest to largest."],
           "return sorted({a})"),
    family("list_evens", ("list",), ["evens", "keep_even", "only_even", "filter_even"],
           ["Return the even numbers of {a}, in order.", "Keep only the even elements of {a}."],
           "return [v for v in {a} if v % 2 == 0]"),
    family("list_odds", ("list",), ["odds", "keep_odd", "only_odd", "filter_odd"],
           ["Return the odd numbers of {a}, in order.", "Keep only the odd elements of {a}."],
           "return [v for v in {a} if v % 2 == 1]"),
    family("list_add_const", ("list",), ["add_{w}_each", "shift_by_{k}", "plus_{w}_all", "increment_all_{k}"],
           ["Return {a} with {k} added to each element.", "Add {k} to every element of {a}."],
           "return [v + {k} for v in {a}]", DIGITS),
    family("list_mul_const", ("list",), ["times_{w}_each", "scale_all_{k}", "multiply_all_{w}", "mul_each_{k}"],
           ["Return {a} with each element multiplied by {k}.", "Multiply every element of {a} by {k}."],
           "return [v * {k} for v in {a}]", DIGITS),
    family("list_greater_const", ("list",), ["above_{w}", "keep_over_{k}", "filter_gt_{w}", "bigger_than_{k}"],
           ["Return the elements of {a} greater than {k}.", "Keep only the elements of {a} above {k}."],
           "return [v for v in {a} if v > {k}]", DIGITS, lambda rng, k: [list_with(rng, k)]),
    family("list_count_const", ("list",), ["count_{w}s", "count_{k}", "how_many_{w}s", "tally_{k}"],
           ["Return how many times {k} appears in {a}.", "Count the elements of {a} equal to {k}."],
           "return {a}.count({k})", DIGITS, lambda rng, k: [list_with(rng, k)]),
    family("list_count", ("list", "int"), ["count_of", "occurrences", "count_value", "frequency"],
           ["Return how many times {b} appears in {a}.", "Count the elements of {a} equal to {b}."],
           "return {a}.count({b})", None, lambda rng, k: list_and_member(rng, k)),
    family("list_contains", ("list", "int"), ["contains", "has_value", "includes", "member"],
           ["Return True if {b} is in {a}.", "Check whether {a} contains {b}."],
           "return {b} in {a}", None, lambda rng, k: list_and_member(rng, k)),
    # strings
    family("str_upper", ("str",), ["shout", "to_upper", "upper_case", "capitals"],
           ["Return {a} in upper case.", "Convert {a} to capital letters."],
           "return {a}.upper()"),
    family("str_lower", ("str",), ["whisper", "to_lower", "lower_case", "small_letters"],
           ["Return {a} in lower case.", "Convert {a} to small letters."],
           "return {a}.lower()", None, lambda rng, k: [mixed_case_word(rng, k)]),
    family("str_reverse", ("str",), ["reverse_text", "mirror", "backwards_word", "flip_string"],
           ["Return {a} reversed.", "Return the characters of {a} in reverse order."],
           "return {a}[::-1]", None, lambda rng, k: [lower_word(rng, min_len=2)]),
    family("str_len", ("str",), ["text_length", "char_count", "word_size", "string_length"],
           ["Return the number of characters in {a}.", "Return how long {a} is."],
           "return len({a})", None, lambda rng, k: [lower_word(rng, min_len=0, max_len=12)]),
    family("str_first", ("str",), ["first_char", "initial", "first_letter", "leading_char"],
           ["Return the first character of {a}.", "Return the letter at the start of {a}."],
           "return {a}[0]", None, lambda rng, k: [lower_word(rng, min_len=2)]),
    family("str_repeat", ("str",), ["repeat_{w}", "echo_{k}", "copies_{w}", "times_{k}_text"],
           ["Return {a} repeated {k} times.", "Return {k} copies of {a} joined together."],
           "return {a} * {k}", DIGITS, lambda rng, k: [lower_word(rng, max_len=4)]),
    family("str_count_char", ("str",), ["count_{k}", "number_of_{k}s", "tally_{k}", "how_many_{k}"],
           ['Return how many times "{k}" appears in {a}.', 'Count the letters "{k}" in {a}.'],
           'return {a}.count("{k}")', LETTERS, lambda rng, c: [word_with(rng, c)]),
    family("str_startswith", ("str",), ["starts_with_{k}", "begins_with_{k}", "has_prefix_{k}", "opens_with_{k}"],
           ['Return True if {a} starts with "{k}".', 'Check whether {a} begins with "{k}".'],
           'return {a}.startswith("{k}")', LETTERS, lambda rng, c: [word_starting(rng, c)]),
    family("str_endswith", ("str",), ["ends_with_{k}", "finishes_with_{k}", "has_suffix_{k}", "closes_with_{k}"],
           ['Return True if {a} ends with "{k}".', 'Check whether {a} finishes with "{k}".'],
           'return {a}.endswith("{k}")', LETTERS, lambda rng, c: [word_ending(rng, c)]),
    family("str_suffix", ("str",), ["add_suffix", "with_ending", "append_text", "extend_word"],
           ['Return {a} followed by "{k}".', 'Append "{k}" to {a}.'],
           'return {a} + "{k}"', SUFFIXES),
]


# ---- building items ---------------------------------------------------------------------


def combinations(fam):
    """All (doc index, function name, constant) choices of a family, in a fixed order."""
    out = []
    for d in range(len(fam["docs"])):
        for template in fam["names"]:
            for k in fam["consts"] or [None]:
                out.append((d, fill(template, k=k), k))
    return sorted(set(out), key=repr)


def fill(template, a=None, b=None, k=None):
    return template.format(a=a, b=b, k=k, w=WORDS.get(k, k))


def pick_args(rng, kind):
    if kind == ("int",):
        return [rng.choice(INT_ARGS)]
    if kind == ("int", "int"):
        return list(rng.choice(INT_PAIRS))
    if kind == ("list",):
        return [rng.choice(LIST_ARGS)]
    if kind == ("list", "int"):
        return list(rng.choice(LIST_INT_PAIRS))
    return [rng.choice(STR_ARGS)]


def solution_function(fam, k):
    """The canonical solution as a Python function (trusted code: our own templates)."""
    params = ["p0", "p1"][: len(fam["kind"])]
    body = fill(fam["body"], *params, k=k)
    namespace = {}
    exec(f"def f({', '.join(params)}):\n    {body}\n", namespace)
    return namespace["f"]


def same(x, y):
    """The grader's equality for the values used here (int, bool, str, list of int): True is not 1."""
    return type(x) is type(y) and x == y


def call(fn, args):
    # Fresh copies of list arguments: a function must not see another call's changes.
    return fn(*[list(a) if type(a) is list else a for a in args])


# Every (family, constant) solution by argument kind, to check that a problem's tests single out its own.
RIVALS = {}
for _fam in FAMILIES:
    for _k in _fam["consts"] or [None]:
        RIVALS.setdefault(_fam["kind"], []).append((_fam["name"], _k, solution_function(_fam, _k)))


def passes(fn, calls, expected):
    for args, want in zip(calls, expected):
        try:
            if not same(call(fn, args), want):
                return False
        except Exception:  # noqa: BLE001 - a rival solution may not apply to these inputs
            return False
    return True


def make_tests(rng, fam, k):
    """N_TESTS distinct calls whose expected outputs no other (family, constant) reproduces."""
    make = fam["inputs"] or default_inputs(fam["kind"])
    own = solution_function(fam, k)
    for _ in range(1000):
        calls = []
        for _ in range(100):
            args = make(rng, k)
            if args not in calls:
                calls.append(args)
            if len(calls) == N_TESTS:
                break
        expected = [call(own, args) for args in calls]
        if all(same(e, expected[0]) for e in expected):
            continue  # a constant answer (all False, ...) would reward a constant function
        rivals = (fn for name, k2, fn in RIVALS[fam["kind"]] if (name, k2) != (fam["name"], k))
        if not any(passes(fn, calls, expected) for fn in rivals):
            return [{"args": args, "expected": e} for args, e in zip(calls, expected)]
    raise RuntimeError(f"no distinguishing tests found for {fam['name']} {k}")


def make_item(rng, fam, combo):
    d, fname, k = combo
    args = pick_args(rng, fam["kind"])
    doc = fill(fam["docs"][d], *args, k=k)
    prompt = f'def {fname}({", ".join(args)}):\n    """{doc}"""\n'
    assert len(prompt) <= MAX_PROMPT_CHARS, prompt
    return {
        "family": fam["name"],
        "prompt": prompt,
        "entry_point": fname,
        "canonical_solution": "    " + fill(fam["body"], *args, k=k) + "\n",
        "tests": make_tests(rng, fam, k),
    }


def generate():
    """Return (train, public, private, decoys) lists of items; no prompt repeats, no combination crosses splits."""
    rng = random.Random(SEED)
    held, kept = [], []
    for fam in FAMILIES:
        combos = combinations(fam)
        rng.shuffle(combos)
        n_held = max(1, round(HELD_OUT * len(combos)))
        held.append(combos[:n_held])
        kept.append(combos[n_held:])

    seen = set()

    def draw(pools, n):
        # Families are equally likely; within one, any of its combinations in the pool.
        items = []
        while len(items) < n:
            f = rng.randrange(len(FAMILIES))
            item = make_item(rng, FAMILIES[f], rng.choice(pools[f]))
            if item["prompt"] not in seen:
                seen.add(item["prompt"])
                items.append(item)
        return items

    evaluation = draw(held, N_PUBLIC + N_PRIVATE)
    train = draw(kept, N_TRAIN)
    # Decoys for the contamination check (eval/decoys.jsonl, hidden, never graded): drawn like the evaluation items,
    # after everything else so the other files stay as they were.
    decoys = draw(held, N_PUBLIC + N_PRIVATE)
    public, private = evaluation[::2], evaluation[1::2]
    for split, items in (("train", train), ("public", public), ("private", private), ("decoy", decoys)):
        for i, item in enumerate(items):
            item["task_id"] = f"MicroEval/{split}/{i}"
    return train, public, private, decoys


if __name__ == "__main__":
    splits.main(__doc__, HERE, generate)
