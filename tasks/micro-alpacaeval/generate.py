"""Generate the micro-alpacaeval data: short instructions with checkable constraints.

    PYTHONPATH=<dir holding microlm and micro_alpacaeval> python3 generate.py [--out-dir DIR]

Writes DIR/data/train.jsonl (agent-visible), DIR/eval/{public,private,decoys}.jsonl
(hidden) and DIR/env/lexicon.txt (the judge's word list), DIR defaulting to this
task's folder. An item:

    {"id": "train-00001",
     "instruction": "Write a note to Sam about the picnic. Be formal. Use exactly 2 bullet points.",
     "constraints": [{"type": "formal"}, {"type": "bullets", "count": 2}],
     "reference": "Dear Sam,\\n- The picnic is on Saturday at noon.\\n- We will meet at the park gate."}

Four kinds of instruction (describe a topic, give tips for an activity, write a
note about an event, reply to a message), each followed by one to three
constraints (format, letter case, length, a word to use or avoid, tone; the
checkers are micro_alpacaeval.constraints). References are assembled from fixed
sentences about each subject, like a strong model's answers, and checked with
those same checkers: most obey every constraint, but FLAW_RATE of them break
exactly one (too many words, a forgotten word, a missing exclamation...), as good
models' answers sometimes do, so a model that obeys everything beats them.

Evaluation instructions are unseen combinations: a quarter of the (kind,
subject, set of constraint types) combinations, chosen by a hash of the
combination (for_evaluation), is kept for evaluation and never occurs in
training (e.g. "tea" with capital letters and a word limit). No instruction
appears twice anywhere. The output is a pure function of SEED: a rerun gives
byte-identical files.
"""

import os
import random

from microlm import splits
from micro_alpacaeval.constraints import TYPES, failed, words

HERE = os.path.dirname(os.path.abspath(__file__))

SEED = 20240805
N_TRAIN, N_PUBLIC, N_PRIVATE = 4000, 200, 200
FLAW_RATE = 0.3  # share of references that break exactly one of their constraints
EVAL_COMBOS = 0.25  # share of (subject, set of constraint types) combinations kept for evaluation
# Lengths that keep BOS + prompt + response within a 256-character context.
MAX_INSTRUCTION, MAX_REFERENCE = 100, 120

# Subjects and the sentences a reference may use about them, in their natural order.
# Each sentence is tagged with a key word: an "include" constraint asks for one
# (the reference then picks that sentence), an "exclude" constraint forbids one.
TOPICS = {  # "Describe <topic>."
    "tea": [("leaves", "Tea is a warm drink made from leaves."), ("morning", "Many people drink it in the morning."),
            ("green", "It can be green or black."), ("relax", "A cup of tea helps people relax.")],
    "coffee": [("beans", "Coffee is a dark drink made from beans."), ("awake", "It has caffeine that keeps you awake."),
               ("breakfast", "Many people drink it at breakfast."), ("sugar", "It tastes bitter without sugar.")],
    "rain": [("clouds", "Rain is water that falls from clouds."), ("crops", "It helps plants and crops grow."),
             ("umbrella", "People carry an umbrella in the rain."), ("fresh", "After rain the air smells fresh.")],
    "the sea": [("salt", "The sea is a large body of salt water."), ("planet", "It covers most of the planet."),
                ("whales", "Fish and whales live in the sea."), ("tides", "Its waves move with the wind and tides.")],
    "a library": [("books", "A library is a place full of books."), ("borrow", "People borrow books for free."),
                  ("quiet", "It is a quiet place to read and study."), ("find", "Librarians help people find books.")],
    "a garden": [("plants", "A garden is a place where plants grow."), ("sun", "It needs sun, water and care."),
                 ("flowers", "Many gardens have flowers and vegetables."), ("bees", "Birds and bees visit a garden.")],
    "bread": [("flour", "Bread is a food made from flour and water."), ("oven", "It is baked in a hot oven."),
              ("butter", "People eat it with butter or soup."), ("soft", "Fresh bread has a soft inside.")],
    "music": [("sound", "Music is sound arranged in a pleasing way."), ("instruments", "People play it on instruments."),
              ("happy", "It can make people happy or calm."), ("listen", "Many people listen to it every day.")],
    "the moon": [("rock", "The moon is a rock that circles the Earth."), ("light", "It shines with light from the sun."),
                 ("night", "Its shape seems to change each night."), ("astronauts", "Astronauts walked on it long ago.")],
    "a bicycle": [("wheels", "A bicycle is a vehicle with two wheels."), ("pedals", "You ride it by pushing the pedals."),
                  ("travel", "It is a cheap and clean way to travel."), ("helmet", "Riders should wear a helmet.")],
    "snow": [("winter", "Snow is frozen water that falls in winter."), ("white", "It covers the ground in white."),
             ("snowmen", "Children like to build snowmen."), ("melts", "Snow melts when the sun comes out.")],
    "a forest": [("trees", "A forest is a large area full of trees."), ("animals", "Many animals make their homes there."),
                 ("wood", "Forests give us clean air and wood."), ("summer", "It is cool and green in summer.")],
    "chess": [("board", "Chess is a board game for two players."), ("pieces", "Each player moves sixteen pieces."),
              ("king", "The goal is to trap the king."), ("patience", "It takes patience and planning.")],
}
ACTIVITIES = {  # "Give two tips for <activity>."; tips are written without the final period
    "sleeping well": [("bed", "Go to bed at the same hour"), ("dark", "Keep the bedroom dark"),
                      ("screens", "Avoid screens late at night"), ("routine", "Follow a calm evening routine")],
    "saving money": [("budget", "Make a monthly budget"), ("meals", "Cook meals at home"),
                     ("impulse", "Avoid buying things on impulse"), ("payday", "Save a little from each payday")],
    "learning a language": [("practice", "Practice a little every day"), ("common", "Learn common words first"),
                            ("films", "Watch films in the language"), ("speakers", "Talk with native speakers")],
    "staying fit": [("walk", "Walk for thirty minutes a day"), ("water", "Drink plenty of water"),
                    ("stretch", "Stretch before you exercise"), ("rest", "Get enough rest between workouts")],
    "studying for a test": [("week", "Start reviewing a week early"), ("sessions", "Study in short sessions"),
                            ("questions", "Test yourself with questions"), ("sleep", "Sleep well the night before")],
    "cooking rice": [("rinse", "Rinse the rice before cooking"), ("cups", "Use two cups of water per cup"),
                     ("heat", "Cook it on low heat"), ("serving", "Let it rest before serving")],
    "keeping a tidy room": [("back", "Put things back after use"), ("bed", "Make your bed each morning"),
                            ("clean", "Clean a little every day"), ("give", "Give away things you never use")],
    "writing an essay": [("plan", "Plan your main points first"), ("opening", "Write a clear opening line"),
                         ("simple", "Use short and simple sentences"), ("mistakes", "Read it again to fix mistakes")],
    "growing tomatoes": [("sunny", "Plant them in a sunny spot"), ("soil", "Water the soil every morning"),
                         ("stems", "Tie the stems to a stick"), ("red", "Pick them when they turn red")],
    "making friends": [("hello", "Smile and say hello"), ("ask", "Ask people about their day"),
                       ("club", "Join a club or a team"), ("listener", "Be a good listener")],
}
EVENTS = {  # "Write a note to <name> about <event>."
    "the meeting": [("Monday", "The meeting is on Monday at ten."), ("plan", "We will review the new plan."),
                    ("notes", "Please bring your notes."), ("hour", "It will take about an hour.")],
    "the picnic": [("Saturday", "The picnic is on Saturday at noon."), ("park", "We will meet at the park gate."),
                   ("fruit", "Please bring some fruit."), ("know", "Let me know if you can come.")],
    "the trip": [("Friday", "The trip starts on Friday morning."), ("bus", "The bus leaves from the station."),
                 ("clothes", "Pack warm clothes and water."), ("Sunday", "We return on Sunday evening.")],
    "the party": [("Friday", "The party is on Friday night."), ("house", "It will be at my house."),
                  ("cake", "There will be cake and music."), ("friend", "Feel free to bring a friend.")],
    "the book club": [("Thursday", "The book club meets on Thursday."), ("mystery", "This month we read a mystery."),
                      ("part", "Please finish the first part."), ("cookies", "I will bring tea and cookies.")],
    "the exam": [("Tuesday", "The exam is next Tuesday at nine."), ("chapters", "It covers the first four chapters."),
                 ("pencils", "Bring two pencils and an eraser."), ("phones", "Phones are not allowed.")],
    "the move": [("flat", "I am moving to a new flat."), ("May", "The move is on the first of May."),
                 ("boxes", "Could you help me carry boxes?"), ("pizza", "I will order pizza for everyone.")],
    "the concert": [("eight", "The concert is on Sunday at eight."), ("tickets", "I have two tickets for us."),
                    ("door", "We can meet at the front door."), ("band", "The band plays for two hours.")],
    "the dinner": [("Wednesday", "Dinner is at my place on Wednesday."), ("pasta", "I am making pasta and salad."),
                   ("seven", "Please come at seven."), ("allergies", "Tell me if you have allergies.")],
    "the game": [("afternoon", "The game is on Saturday afternoon."), ("field", "Our team plays at the city field."),
                 ("shirt", "Wear the blue shirt."), ("early", "We need to arrive early.")],
}
MESSAGES = {  # 'Reply to <name>: "<message>"'
    "Can you join the meeting on Friday?": [
        ("join", "Yes, I can join the meeting on Friday."), ("invitation", "Thank you for the invitation."),
        ("report", "I will bring the latest report.")],
    "Could you send me the report?": [
        ("today", "Yes, I will send the report today."), ("noon", "It should reach you by noon."),
        ("anything", "Let me know if you need anything else.")],
    "Are you free for lunch tomorrow?": [
        ("lunch", "Yes, I am free for lunch tomorrow."), ("cafe", "How about the cafe near the office?"),
        ("forward", "I look forward to it.")],
    "Can you help me move on Sunday?": [
        ("help", "Yes, I can help you on Sunday."), ("car", "I will bring my car."),
        ("arrive", "What time should I arrive?")],
    "Did you like the book I lent you?": [
        ("enjoyed", "Yes, I enjoyed the book very much."), ("surprise", "The ending was a real surprise."),
        ("return", "I will return it this week.")],
    "Can we move our call to Monday?": [
        ("works", "Yes, Monday works well for me."), ("morning", "Let us talk at ten in the morning."),
        ("calendar", "I will update the calendar.")],
    "Would you like to join our team?": [
        ("glad", "Thank you, I would be glad to join."), ("excited", "I am excited to work with you."),
        ("start", "When should I start?")],
    "Can you water my plants this week?": [
        ("plants", "Yes, I can water your plants."), ("evening", "I will come by every evening."),
        ("key", "Please leave the key with me.")],
}
NAMES = ["Sam", "Ana", "Tom", "Mia", "Leo", "Eva", "Ben", "Zoe", "Max", "Ivy", "Kai", "Lily"]
BANKS = {"describe": TOPICS, "tips": ACTIVITIES, "note": EVENTS, "reply": MESSAGES}
KIND_WEIGHTS = {"describe": 3, "tips": 3, "note": 3, "reply": 2}
NUMBER_WORDS = {2: "two", 3: "three"}

TASK_PHRASES = {
    "describe": ["Describe {subject}.", "Tell me about {subject}.", "Write about {subject}."],
    "tips": ["Give {n} tips for {subject}.", "Share {n} tips for {subject}."],
    "note": ["Write a note to {name} about {subject}.", "Send {name} a note about {subject}."],
    "reply": ['Reply to {name}: "{subject}"', 'Answer {name}: "{subject}"'],
}
CONSTRAINT_PHRASES = {
    "bullets": ["Use exactly {count} bullet points.", "Answer with {count} bullet points."],
    "numbered": ["Use a numbered list.", "Answer as a numbered list."],
    "one_sentence": ["Answer in one sentence.", "Use only one sentence."],
    "all_caps": ["Write in all capital letters.", "Use only capital letters."],
    "lowercase": ["Write in lowercase only.", "Use no capital letters."],
    "max_words": ["Use at most {count} words.", "Keep it to {count} words or fewer."],
    "exact_words": ["Use exactly {count} words."],
    "include": ["Mention the word '{word}'.", "Include the word '{word}'."],
    "exclude": ["Do not use the word '{word}'.", "Avoid the word '{word}'."],
    "formal": ["Be formal.", "Use a formal tone."],
    "friendly": ["Be friendly.", "Use a friendly tone."],
}
# Which constraints make sense for each kind of instruction.
APPLICABLE = {
    "describe": ["bullets", "numbered", "one_sentence", "all_caps", "lowercase", "max_words", "exact_words", "include", "exclude"],
    "tips": ["bullets", "numbered", "one_sentence", "all_caps", "lowercase", "max_words", "include", "exclude"],
    "note": ["bullets", "all_caps", "lowercase", "max_words", "include", "exclude", "formal", "friendly"],
    "reply": ["all_caps", "lowercase", "max_words", "include", "exclude", "formal", "friendly"],
}
# At most one constraint of each group; exact word counts only for plain prose.
GROUPS = [{"bullets", "numbered", "one_sentence"}, {"all_caps", "lowercase"}, {"max_words", "exact_words"}, {"formal", "friendly"}]
CONFLICTS = {frozenset(p) for p in [("exact_words", "bullets"), ("exact_words", "numbered")]}


def compatible(new, chosen):
    if new in chosen:
        return False
    for other in chosen:
        if any(new in g and other in g for g in GROUPS) or frozenset((new, other)) in CONFLICTS:
            return False
    return True


def for_evaluation(kind, subject, types):
    """Whether this combination of subject and constraint types is kept for evaluation.

    A pure function of the combination (seeded by its text, which random.Random hashes
    with SHA-512), so every item with the same subject and types lands on the same side.
    """
    key = f"{SEED}|{kind}|{subject}|{','.join(sorted(types))}"
    return random.Random(key).random() < EVAL_COMBOS


def sample_types(rng, kind):
    """One to three compatible constraint types for an item of this kind."""
    k = rng.choice([1, 2, 2, 3])
    chosen = []
    for _ in range(50):
        if len(chosen) == k:
            break
        t = rng.choice(APPLICABLE[kind])
        if compatible(t, chosen):
            chosen.append(t)
    return chosen


def lower_first(text):
    return text[0].lower() + text[1:]


def word_set(text):
    return {w.lower() for w in words(text)}


def sentence_count(kind, types, n):
    """How many of the subject's sentences an answer obeying `types` uses: two (tips: as many
    as asked), one when it must be a single sentence, an exact or a small word count."""
    if kind == "tips":
        return n
    if {"one_sentence", "exact_words"} & set(types) or ("max_words" in types and "numbered" not in types):
        return 1
    return 2


def sample_spec(rng, kind, subject, types):
    """Everything an instruction fixes apart from word counts: names, how many tips or bullets, the words."""
    units = BANKS[kind][subject]
    spec = {"kind": kind, "subject": subject, "types": list(types), "name": None}
    if kind in ("note", "reply"):
        spec["name"] = rng.choice(NAMES)
    spec["n"] = 2 if "one_sentence" in types else rng.choice([2, 3])  # tips asked for
    if "bullets" in types:
        spec["bullets"] = spec["n"] if kind == "tips" else rng.choice([2, 3])
    spec["bullets_miss"] = rng.choice([-1, 1]) if spec.get("bullets", 0) > 2 else 1  # a flawed bullet count
    count = spec.get("bullets") or sentence_count(kind, types, spec["n"])
    default = list(range(count))  # the sentences an answer would use without word constraints
    if "exclude" in types:
        spec["exclude"] = units[rng.choice(default)][0]
    if "include" in types:
        # Preferably a word the usual sentences lack, so that including it takes a decision.
        pool = [i for i in range(len(units)) if i not in default] or list(range(len(units)))
        pool = [i for i in pool if spec.get("exclude", "").lower() not in word_set(units[i][1])]
        if not pool:
            return None
        spec["include"] = units[rng.choice(pool)][0]
    return spec


def render(spec, flaw=None, ignore=()):
    """The answer to spec's instruction that obeys its constraints, but breaks `flaw` the way a good
    model might (one bullet too many, the last sentence not converted, a forgotten word, ...) and
    writes plainly as if `ignore`d constraints were not asked. None when the subject lacks sentences."""
    kind, units, name = spec["kind"], BANKS[spec["kind"]][spec["subject"]], spec["name"]
    types = [t for t in spec["types"] if t not in ignore]
    count = sentence_count(kind, types, spec["n"])
    if "bullets" in types:
        count = spec["bullets"] + (spec["bullets_miss"] if flaw == "bullets" else 0)
    if flaw == "one_sentence":
        count = 2
    include = spec.get("include") if "include" in types and flaw != "include" else None
    exclude = spec.get("exclude") if "exclude" in types and flaw != "exclude" else None
    required = [i for i, (key, _) in enumerate(units) if key == include]
    banned = {i for i, (_, s) in enumerate(units) if exclude and exclude.lower() in word_set(s)}
    picked = list(required)
    for i in range(len(units)):
        if len(picked) < count and i not in picked and i not in banned:
            picked.append(i)
    if len(picked) < count or set(picked) & banned:
        return None
    chosen = [units[i][1] for i in sorted(picked)]

    if kind == "tips":
        if "one_sentence" in types and flaw != "one_sentence":
            sentences = [f"{chosen[0]} and {lower_first(chosen[1])}."]
        else:
            sentences = [s + "." for s in chosen]
    else:
        sentences = chosen
    case = "all_caps" if "all_caps" in types else "lowercase" if "lowercase" in types else None
    convert = {"all_caps": str.upper, "lowercase": str.lower, None: str}[case]
    # A case flaw: the last sentence keeps its ordinary capitals.
    keep = len(sentences) - 1 if flaw == case else len(sentences)
    sentences = [convert(s) if i < keep else s for i, s in enumerate(sentences)]
    if "bullets" in types or (flaw == "numbered" and "numbered" in types):
        lines = ["- " + s for s in sentences]
    elif "numbered" in types:
        lines = [f"{i}. {s}" for i, s in enumerate(sentences, 1)]
    else:
        lines = [" ".join(sentences)]
    if name is not None:
        greeting = f"Hi {name},"
        if "formal" in types and flaw != "formal":
            greeting = f"Dear {name},"
        elif "friendly" in types and flaw != "friendly":
            greeting = f"Hi {name}!"
        lines = [convert(greeting)] + lines
    return "\n".join(lines)


def instruction_text(rng, spec):
    """The instruction and its constraint dicts, phrased with randomly chosen wordings."""
    constraints = []
    for t in spec["types"]:
        field = {"bullets": "bullets", "max_words": "max_words", "exact_words": "exact_words",
                 "include": "include", "exclude": "exclude"}.get(t)
        key = "word" if t in ("include", "exclude") else "count"
        constraints.append({"type": t, key: spec[field]} if field else {"type": t})
    kind = spec["kind"]
    task = rng.choice(TASK_PHRASES[kind])
    if kind == "tips" and "bullets" in spec["types"]:
        task = task.replace("{n}", "some")  # the bullet count says how many
    fields = {"subject": spec["subject"], "n": NUMBER_WORDS[spec["n"]], "name": spec["name"]}
    parts = [task.format(**fields)] + [rng.choice(CONSTRAINT_PHRASES[c["type"]]).format(**c) for c in constraints]
    return " ".join(parts), constraints


def compose(rng, kind, subject, types, flaw):
    """Build one item with these constraint types; `flaw` (a type or None) is the one the reference breaks.

    Returns (item without its id, spec), or None when this combination cannot be written.
    """
    spec = sample_spec(rng, kind, subject, types)
    reference = spec and render(spec, flaw)
    if reference is None:
        return None
    # Word limits fit the reference: a little room under "at most", none under "exactly".
    n_words = len(words(reference))
    if "max_words" in types:
        spec["max_words"] = n_words + (-rng.randint(1, 3) if flaw == "max_words" else rng.randint(0, 3))
    if "exact_words" in types:
        spec["exact_words"] = n_words + (rng.choice([-1, 1]) if flaw == "exact_words" else 0)
    instruction, constraints = instruction_text(rng, spec)
    # The reference must break exactly the flawed constraint (or none) and fit the context.
    if [c["type"] for c in failed(constraints, reference)] != ([flaw] if flaw else []):
        return None
    if len(instruction) > MAX_INSTRUCTION or len(reference) > MAX_REFERENCE:
        return None
    return {"instruction": instruction, "constraints": constraints, "reference": reference}, spec


def pick_subject(rng):
    kind = rng.choices(sorted(KIND_WEIGHTS), weights=[KIND_WEIGHTS[k] for k in sorted(KIND_WEIGHTS)])[0]
    return kind, rng.choice(sorted(BANKS[kind]))


def make_items(rng, n, for_eval, seen, prefix):
    items = []
    while len(items) < n:
        kind, subject = pick_subject(rng)
        types = sample_types(rng, kind)
        if for_evaluation(kind, subject, types) != for_eval:
            continue
        flaw = rng.choice(types) if rng.random() < FLAW_RATE else None
        made = compose(rng, kind, subject, types, flaw)
        if made is None or made[0]["instruction"] in seen:
            continue
        item = made[0]
        seen.add(item["instruction"])
        items.append(dict(id=f"{prefix}-{len(items) + 1:05d}", **item))
    return items


def generate():
    """Return (train, public, private, decoys) lists of items, all instructions distinct."""
    rng = random.Random(SEED)
    seen = set()
    train = make_items(rng, N_TRAIN, False, seen, "train")
    # Public and private come from one stream, dealt alternately: the same distribution.
    evaluation = make_items(rng, N_PUBLIC + N_PRIVATE, True, seen, "eval")
    public, private = evaluation[0::2][:N_PUBLIC], evaluation[1::2][:N_PRIVATE]
    for split, items in (("public", public), ("private", private)):
        for i, item in enumerate(items, 1):
            item["id"] = f"{split}-{i:04d}"
    # Decoys for the contamination check (eval/decoys.jsonl, hidden, never graded): drawn like the evaluation items,
    # after everything else so the other files stay as they were.
    decoys = make_items(rng, N_PUBLIC + N_PRIVATE, True, seen, "decoy")
    return train, public, private, decoys


def pretraining_example(rng, follow):
    """A training-like instruction with a weak answer, for the base model's pretraining text.

    The answer obeys each constraint with probability `follow` and otherwise writes as if
    it were not asked (two plain sentences, ordinary case, a plain greeting), like a
    model that has read a lot of text but was never taught to follow instructions.
    Returns (instruction, answer).
    """
    while True:
        kind, subject = pick_subject(rng)
        types = sample_types(rng, kind)
        made = None if for_evaluation(kind, subject, types) else compose(rng, kind, subject, types, None)
        if made is None:
            continue
        item, spec = made
        answer = render(spec, ignore=[t for t in spec["types"] if rng.random() >= follow])
        if answer is not None:
            return item["instruction"], answer


def lexicon():
    """Every word of the banks, names and phrasings, lowercased and sorted."""
    texts = list(NAMES) + ["Dear", "Hi"]
    for bank in BANKS.values():
        for subject, units in bank.items():
            texts.append(subject)
            texts.extend(s for _, s in units)
    for phrases in list(TASK_PHRASES.values()) + list(CONSTRAINT_PHRASES.values()):
        texts.extend(p.replace("{", " ").replace("}", " ") for p in phrases)
    texts.extend(NUMBER_WORDS.values())
    return sorted({w.lower() for t in texts for w in words(t)})


def main():
    out_dir = splits.main(__doc__, HERE, generate)
    os.makedirs(os.path.join(out_dir, "env"), exist_ok=True)
    with open(os.path.join(out_dir, "env", "lexicon.txt"), "w") as f:
        f.write("".join(w + "\n" for w in lexicon()))


if __name__ == "__main__":
    main()
