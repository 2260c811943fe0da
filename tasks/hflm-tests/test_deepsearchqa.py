"""Tests of deepsearchqa's adapter (hflm.deepsearchqa), its assets and its rollouts, against the reference's code.

    .venv-full/bin/python tasks/hflm-tests/test_deepsearchqa.py

The reference is RD-Agent autorl_bench's benchmarks/deepsearchqa (data.py: the split; eval.py: the ReAct loop, the
search observations, the judge and its string-match fallback), read from its source.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, HERE)  # for the fixtures

import fixture_smoke_deepsearchqa  # noqa: E402
from hflm import assets, deepsearchqa, deepsearchqa_assets  # noqa: E402

HUB = HOME = None


def setUpModule():
    global HUB, HOME
    HUB = fixture_smoke_deepsearchqa.write(tempfile.mkdtemp(prefix="deepsearchqa-hub-"), "default")
    HOME = tempfile.mkdtemp(prefix="deepsearchqa-home-")
    assets.prepare("deepsearchqa", HOME, fixture_smoke_deepsearchqa.write_tiny_model(HUB), HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def rows_of(name):
    with open(os.path.join(HOME, "assets", "deepsearchqa", name)) as f:
        return [json.loads(line) for line in f]


class ScriptedPolicy:
    """The model's side of the loop as fixed texts (what the engine returns after its stops), for the loop's rules."""

    def __init__(self, scripts, tokens=lambda text: len(text) // 4):
        self.scripts, self.calls, self.tokens = scripts, [], tokens

    def complete_with(self, prompts, params):
        self.calls.append((list(prompts), params))
        outputs = []
        for text in prompts:
            question = text.split("Question: ")[1].split("\n")[0]
            script = self.scripts[question]
            outputs.append(script.pop(0) if script else " Still thinking.")
        return outputs


class ReferenceLoopTest(unittest.TestCase):
    def test_prompt_and_generation_are_the_references(self):
        self.assertEqual(deepsearchqa.prompt("Who?", "Set Answer"),
                         deepsearchqa.REACT_SYSTEM_PROMPT + "\n\nQuestion: Who?\nAnswer type: Set Answer\n\nThought:")
        # The reference's REACT_SYSTEM_PROMPT (benchmarks/deepsearchqa/eval.py at 471eb30d), written out here from its
        # text so that a change on our side shows as a difference, byte for byte.
        reference = ("You are a research assistant that answers questions by searching the web.\n\n"
                     "You must follow this format strictly:\n"
                     "Thought: [your reasoning]\n"
                     "Action: search[your search query]   <- to search the web\n"
                     "  OR\n"
                     "Action: answer[Paris]   <- to give final answer\n\n"
                     "Rules:\n"
                     "- Always start with a Thought\n"
                     "- Use search[] to find information\n"
                     "- Use answer[] ONLY when you have enough information\n"
                     "- For Set Answer questions, list all items separated by commas\n"
                     "- Be concise and factual\n")
        self.assertEqual(deepsearchqa.REACT_SYSTEM_PROMPT, reference)
        g, f = deepsearchqa.GENERATION, deepsearchqa.FORCED
        self.assertEqual((g.max_new_tokens, g.temperature, g.stop, g.chat_template), (256, 0.0, ("\nAction:", "\nThought:", "\nObservation:"), False))
        self.assertEqual((f.max_new_tokens, f.temperature, f.stop), (128, 0.0, ("]",)))
        self.assertEqual((deepsearchqa.MAX_STEPS, deepsearchqa.CONTEXT_TOKENS, deepsearchqa.TOP_K), (6, 4096, 3))

    def test_search_answer_forced_placeholder_and_out_of_steps_in_one_lockstep_batch(self):
        rows = [{"question": q, "answer_type": "Single Answer"} for q in ("q1", "q2", "q3", "q4")]
        policy = ScriptedPolicy({
            "q1": [" I need X. Action: search[capital of X]", " Found. Action: answer[Lima] and more"],
            "q2": [" I think it is Lima", "Lima"],  # no action: the forced "Action: answer[" gets "Lima"
            "q3": [" Action: answer[your final answer]", " Sorry. Action: answer[Quito]"],
            "q4": [" Action: search[a]", " Action: answer[your final answer]"] + [" Action: search[b]"] * 4,
        })
        searched = []
        episodes = deepsearchqa.play(rows, policy, lambda q: searched.append(q) or f"snippet about {q}")
        self.assertEqual([e["predicted"] for e in episodes], ["Lima", "Lima", "Quito", "I don't know"])
        self.assertEqual([e["ended"] for e in episodes], ["answer", "forced", "answer", "steps"])
        self.assertEqual([e["steps"] for e in episodes], [2, 1, 2, 6])
        self.assertEqual(episodes[0]["searches"], ["capital of X"])
        self.assertEqual(deepsearchqa.transcript(episodes[0]), deepsearchqa.prompt("q1") + " I need X. Action: search[capital of X]"
                         "\nObservation: snippet about capital of X\nThought: Found. Action: answer[Lima] and more")
        self.assertEqual(deepsearchqa.transcript(episodes[1]), deepsearchqa.prompt("q2") + " I think it is Lima\nAction: answer[Lima")
        self.assertIn(" Action: answer[your final answer]\nThat is not a valid answer. Please think again.\nThought: Sorry.",
                      deepsearchqa.transcript(episodes[2]))
        # One call per step over the questions still running, the forced answers in a call of their own.
        first_prompts, first_params = policy.calls[0]
        self.assertEqual((len(first_prompts), first_params), (4, deepsearchqa.GENERATION))
        self.assertEqual((len(policy.calls[1][0]), policy.calls[1][1]), (1, deepsearchqa.FORCED))
        self.assertEqual(searched.count("b"), 4)

    def test_a_prompt_past_the_context_ends_the_episode(self):
        rows = [{"question": "q", "answer_type": "Single Answer"}]
        # 4,000 tokens once the observation is in: fewer than 256 of the 4,096 are left to generate in.
        policy = ScriptedPolicy({"q": [" Action: search[x]"]}, tokens=lambda text: 4000 if "snippet" in text else 10)
        episode = deepsearchqa.play(rows, policy, lambda q: "snippet")[0]
        self.assertEqual((episode["ended"], episode["steps"], episode["predicted"]), ("context", 1, "I don't know"))

    def test_string_match_is_the_references_fallback(self):
        match = deepsearchqa.string_match
        self.assertTrue(match("It is Paris.", "paris", "Single Answer"))
        self.assertTrue(match("Paris", "Paris, France", "Single Answer"))  # pred in gold, as the reference
        self.assertFalse(match("Lyon", "Paris", "Single Answer"))
        self.assertTrue(match("Red, blue and green", "green, red, blue", "Set Answer"))
        self.assertFalse(match("Red and blue", "green, red, blue", "Set Answer"))
        self.assertFalse(match("  ", "Paris", "Single Answer"))  # deliberate: an empty answer never matches

    def test_a_search_error_is_the_observation_in_rollouts_and_raised_in_grading(self):
        os.environ.pop("A2RL_SEARCH_SOCKET", None)
        sys.path.insert(0, os.path.join(os.path.dirname(TASKS), "src", "search", "client"))
        self.assertTrue(deepsearchqa.channel_search("x").startswith("Search error: This run has no search channel"))
        from a2rl_search import SearchError

        with self.assertRaises(SearchError):
            deepsearchqa.channel_search("x", strict=True)


class AssetsTest(unittest.TestCase):
    def test_the_references_seeded_split_and_halves(self):
        with open(os.path.join(HUB, fixture_smoke_deepsearchqa.CSV), newline="") as f:
            source = list(csv.DictReader(f))
        train, public, private = rows_of("data/train.jsonl"), rows_of("eval/public.jsonl"), rows_of("eval/private.jsonl")
        self.assertEqual((len(train), len(public) + len(private)), (100, len(source) - 100))
        # datasets' own shuffle, as the reference calls it: Dataset.shuffle(seed=42), then select(range(100)).
        import datasets

        shuffled = datasets.Dataset.from_list(source).shuffle(seed=42)
        self.assertEqual([r["question"] for r in train], shuffled["problem"][:100])
        self.assertEqual(sorted(r["question"] for r in public + private), sorted(shuffled["problem"][100:300]))
        self.assertFalse({r["id"] for r in public} & {r["id"] for r in private})
        self.assertEqual(set(train[0]), {"id", "question", "answer", "answer_type", "problem_category"})
        self.assertEqual(assets.verify("deepsearchqa", HOME, fixture_smoke_deepsearchqa.TINY_MODEL), [])
        with open(os.path.join(HOME, "assets", "deepsearchqa", "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["sources"][0]["files"]["DSQA-full.csv"]["sha256"],
                         assets.sha256_file(os.path.join(HUB, fixture_smoke_deepsearchqa.CSV)))
        self.assertEqual(deepsearchqa_assets.DEFAULT_MODEL, "Qwen/Qwen2.5-1.5B-Instruct")

    def test_a_missing_or_foreign_csv_is_refused_saying_what_to_do(self):
        home, hub = tempfile.mkdtemp(prefix="deepsearchqa-home-"), tempfile.mkdtemp(prefix="deepsearchqa-hub-")
        try:
            shutil.copytree(HUB, hub, dirs_exist_ok=True)
            path = os.path.join(hub, fixture_smoke_deepsearchqa.CSV)
            os.unlink(path)
            with self.assertRaisesRegex(assets.AssetsError, "hf download google/deepsearchqa DSQA-full.csv --repo-type dataset"):
                assets.prepare("deepsearchqa", home, fixture_smoke_deepsearchqa.TINY_MODEL, hub)
            with open(path, "w") as f:
                f.write("question,answer\nWho?,Me\n")
            with self.assertRaisesRegex(assets.AssetsError, "lacks the column\\(s\\) problem, problem_category, answer_type"):
                assets.prepare("deepsearchqa", home, fixture_smoke_deepsearchqa.TINY_MODEL, hub)
            self.assertFalse(os.path.exists(os.path.join(home, "assets", "deepsearchqa")))
        finally:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(hub, ignore_errors=True)


class RolloutsTest(unittest.TestCase):
    def test_episodes_of_train_questions_with_string_match_rewards(self):
        out_dir = tempfile.mkdtemp(prefix="deepsearchqa-rollouts-")
        try:
            base = os.path.join(HOME, "models", fixture_smoke_deepsearchqa.TINY_MODEL.replace("/", "--"))
            out = os.path.join(out_dir, "batch.jsonl")
            # No channel here: each search's observation is the reference's "Search error: ...", and the episode goes on.
            env = {k: v for k, v in os.environ.items() if k != "A2RL_SEARCH_SOCKET"}
            env["PYTHONPATH"] = os.pathsep.join([TASKS, os.path.join(os.path.dirname(TASKS), "src", "search", "client")])
            done = subprocess.run(
                [sys.executable, "-m", "hflm.rollouts", "--task", "deepsearchqa", "--checkpoint", base, "--base", base,
                 "--data", os.path.join(HOME, "assets", "deepsearchqa", "data", "train.jsonl"), "--n", "4",
                 "--group-size", "2", "--temperature", "0", "--threads", "1", "--out", out],
                env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(json.loads(done.stdout.strip().splitlines()[-1]), {"episodes": 4, "mean_reward": 0.0, "out": out})
            with open(out) as f:
                lines = [json.loads(line) for line in f]
            self.assertEqual(sorted(line["group"] for line in lines), [0, 0, 1, 1])
            for line in lines:
                self.assertEqual((line["searches"][0], line["reward"]), ("city of Ann", 0.0))
                self.assertTrue(line["segments"][1][0].startswith("\nObservation: Search error: This run has no search channel"))
                self.assertEqual(line["prompt"], deepsearchqa.prompt(line["question"], line["answer_type"]))
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
