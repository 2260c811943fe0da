"""deepsearchqa's fixture: google/deepsearchqa's csv in the repo's own layout, a search corpus, and tiny models.

    .venv-full/bin/python tasks/hflm-tests/fixture_smoke_deepsearchqa.py DIR [--profile smoke]
    .venv-full/bin/python tasks/hflm-tests/fixture_smoke_deepsearchqa.py --corpus FILE    # the corpus alone

Writes DIR/datasets/google/deepsearchqa/DSQA-full.csv (upstream's columns: problem, problem_category, answer,
answer_type) and, for "smoke", SMOKE_MODEL. fixture_hub.py calls it for every profile; the corpus is the search
provider's (`serve --search local --search-corpus FILE`), not the task's, so it is written apart (`corpus`).

The questions are about made-up people and nine attributes of each (a city, a pet, a colour, ...), one corpus
document a fact ("Ann's city is Rome."): "Which city is home to Ann?". A model answers one by searching for what it
asks (`Action: search[city of Ann]`: the attribute and the name copied from the question, which ends with the name)
and copying the value from the observation, whose first fact is the one asked for (`Action: answer[ Rome]`, " Rome"
the very token the observation holds); without the search it can only guess one of eight. Every fact has the same
number of tokens and every question the same tail, so each copy is from a fixed distance. The smoke base model
answers `nothing` at once and stops, which is never right; its output layer is tied to its embeddings, as Qwen2.5's
small models' are.
"""

import csv
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm
SMOKE_MODEL = "a2rl-fixture/smoke-deepsearchqa"
TINY_MODEL = "a2rl-fixture/tiny-deepsearchqa"
CSV = "datasets/google/deepsearchqa/DSQA-full.csv"
# People per profile, nine questions each. The reference's cut keeps 100 train questions and up to 200 after them:
# "smoke" leaves 44 for evaluation (22 a half), "default" 8. Few people, each asked about often: every name the
# evaluation questions hold is in train questions too (their attributes are not).
PEOPLE = {"default": 12, "smoke": 16}
NAMES = ("Ann", "Ben", "Cal", "Dan", "Eve", "Fay", "Gus", "Hal", "Ida", "Jan", "Kim", "Lou", "Max", "Ned", "Oda", "Pam")
# attribute: (its values, the question); the name ends the question.
ATTRIBUTES = {
    "city": (("Rome", "Oslo", "Lima", "Cairo", "Delhi", "Paris", "Tokyo", "Quito"), "Which city is home to {name}?"),
    "pet": (("dog", "cat", "horse", "parrot", "rabbit", "goat", "snake", "turtle"), "Which pet is kept by {name}?"),
    "colour": (("red", "blue", "green", "yellow", "purple", "orange", "black", "white"), "Which colour is liked by {name}?"),
    "drink": (("tea", "coffee", "milk", "juice", "cocoa", "cider", "water", "soda"), "Which drink is preferred by {name}?"),
    "game": (("chess", "poker", "bridge", "golf", "tennis", "rugby", "darts", "bingo"), "Which game is played by {name}?"),
    "vehicle": (("van", "bus", "tram", "jeep", "truck", "taxi", "boat", "bike"), "Which vehicle is driven by {name}?"),
    "fruit": (("figs", "plums", "pears", "limes", "dates", "grapes", "melons", "apples"), "Which fruit is eaten by {name}?"),
    "tool": (("hammer", "saw", "drill", "spade", "rake", "wrench", "chisel", "ladder"), "Which tool is used by {name}?"),
    "job": (("baker", "nurse", "pilot", "judge", "miner", "tailor", "farmer", "singer"), "Which job is held by {name}?"),
}
CATEGORIES = {"city": "Geography", "job": "Other"}
BASE_ANSWER = "nothing"
# What a model that learnt the task writes (the smoke oracle's expert, tasks/deepsearchqa/oracle/sft.py, writes the
# same): a thought and its action on one line, as the reference's stops need.
SEARCH_STEP = " Action: search[{attribute} of {name}]"
ANSWER_STEP = " Action: answer[ {value}]"  # " Rome" as the observation writes it: one token to copy
SMOKE_VOCAB, SMOKE_HIDDEN, SMOKE_LAYERS, SMOKE_WINDOW = 768, 64, 2, 32


def people(profile):
    """[(name, {attribute: value})] of the profile, seeded."""
    rng = random.Random(f"deepsearchqa-fixture-{profile}")
    return [(name, {a: rng.choice(values) for a, (values, _q) in ATTRIBUTES.items()}) for name in NAMES[:PEOPLE[profile]]]


def fact(name, attribute, value):
    """One corpus document's text: every fact the same number of tokens, so an answer sits where the search put it."""
    return f"{name}'s {attribute} is {value}."


def documents(profile):
    return [{"title": name, "text": fact(name, a, v), "url": f"https://people.example/{name.lower()}/{a}"}
            for name, facts in people(profile) for a, v in facts.items()]


def question(attribute, name):
    return ATTRIBUTES[attribute][1].format(name=name)


def rows(profile):
    """The csv's rows, upstream's columns in upstream's order."""
    out = []
    for name, facts in people(profile):
        for attribute in ATTRIBUTES:
            out.append({"problem": question(attribute, name), "problem_category": CATEGORIES.get(attribute, "Other"),
                        "answer": facts[attribute], "answer_type": "Single Answer"})
    return out


def write_csv(hub_dir, profile):
    path = os.path.join(hub_dir, CSV)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["problem", "problem_category", "answer", "answer_type"])
        writer.writeheader()
        writer.writerows(rows(profile))
    return path


def write_corpus(path, profile="smoke"):
    """The search corpus (JSONL of {title, text, url}) for `serve --search local --search-corpus`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for document in documents(profile):
            f.write(json.dumps(document) + "\n")
    return path


def observation(profile, name, attribute):
    """What the local provider answers `search[<attribute> of <name>]` with: the fact asked for, then the person's next
    two facts in the corpus's order (BM25: the name is rarer than the attribute, ties in corpus order)."""
    facts = dict(people(profile))[name]
    order = list(ATTRIBUTES)
    others = [a for a in order if a != attribute][:2]
    return " | ".join(fact(name, a, facts[a]) for a in [attribute, *others])


def tokenizer_texts(profile):
    from hflm import deepsearchqa

    texts = [deepsearchqa.REACT_SYSTEM_PROMPT] * 4
    for name, facts in people(profile):
        for attribute in ATTRIBUTES:
            texts.append(deepsearchqa.prompt(question(attribute, name)) + SEARCH_STEP.format(attribute=attribute, name=name)
                         + f"\nObservation: {observation(profile, name, attribute)}\nThought:"
                         + ANSWER_STEP.format(value=facts[attribute]))
    texts.append(f"Action: answer[{BASE_ANSWER}]")
    return texts


def tie_embeddings(model_dir):
    """Rebuilds the model in model_dir with its output layer tied to its input embeddings (as Qwen2.5's small models
    are): copying a token from the context is then one mapping for every token, not one to learn per token."""
    import torch
    from transformers import AutoConfig, Qwen2ForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    config.tie_word_embeddings = True
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = config.eos_token_id, config.pad_token_id
    model.save_pretrained(model_dir)


def write_base_model(model_dir, profile, hidden_size, layers, window, vocab_size, steps, search_first=False):
    """A tiny Qwen2 whose tokenizer knows the fixture's words, trained to answer every question with BASE_ANSWER and
    stop (its end-of-sequence token): a random model would write 256 tokens a step. search_first: it first searches
    for the first person (`search[about Ann]`, stopping at "\nObservation:"), then answers so after the observation."""
    from transformers import AutoTokenizer

    from hflm import deepsearchqa, tiny

    tiny.build(model_dir, tokenizer_texts(profile), seed=0, vocab_size=vocab_size, hidden_size=hidden_size,
               layers=layers, sliding_window=window)
    tie_embeddings(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    answer = encode(f" Action: answer[{BASE_ANSWER}]") + [tokenizer.eos_token_id]
    first_name = people(profile)[0][0]
    search = SEARCH_STEP.format(attribute="city", name=first_name)
    train = []
    for name, _facts in people(profile):
        for attribute in ATTRIBUTES:
            opening = deepsearchqa.prompt(question(attribute, name))
            turns = [(opening, answer)]
            if search_first:
                seen = f"\nObservation: {observation(profile, first_name, 'city')}\nThought:"
                turns = [(opening, encode(search + "\nObservation:")), (opening + search + seen, answer)]
            train += [(encode(context) + target, [-100] * len(encode(context)) + target) for context, target in turns]
    tiny.fit(model_dir, train, steps, batch_size=8)


def write_tiny_model(hub_dir):
    """TINY_MODEL (2 layers of width 64) into a hub folder: searches once and answers every question, for tests of form
    (the grader's and the rollouts' searches included). Returns its id."""
    write_base_model(os.path.join(hub_dir, "models", TINY_MODEL), "default", 64, 2, None, 512, steps=120, search_first=True)
    return TINY_MODEL


def write(hub_dir, profile="default"):
    """The profile's csv (and, for "smoke", SMOKE_MODEL) into hub_dir; returns hub_dir."""
    write_csv(hub_dir, profile)
    if profile == "smoke":
        write_base_model(os.path.join(hub_dir, "models", SMOKE_MODEL), profile, SMOKE_HIDDEN, SMOKE_LAYERS, SMOKE_WINDOW,
                         SMOKE_VOCAB, steps=40)
    return hub_dir


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?")
    parser.add_argument("--profile", choices=sorted(PEOPLE), default="default")
    parser.add_argument("--corpus", help="write only the search corpus, to this file")
    args = parser.parse_args()
    if args.corpus:
        write_corpus(args.corpus, args.profile)
    else:
        write(args.dir, args.profile)
