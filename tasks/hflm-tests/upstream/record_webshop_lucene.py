"""Records webshop_lucene.json: upstream WebShop's search (pyserini 0.17's LuceneSearcher, in Lucene 8 itself) over
the fixture catalogue, for the episodes and queries that tasks/hflm-tests/test_webshop_lucene.py plays on the stand-in.

    apt-get install liblucene8-java     # Debian's Lucene 8 jars under /usr/share/java; Java 11 or newer
    .venv-full/bin/python tasks/hflm-tests/upstream/record_webshop_lucene.py

The fixture catalogue's index documents are written as the webshop task's prepare writes them (upstream's
convert_product_file_format.py), WebShopLucene.java indexes and searches them as Anserini does, and each episode's
actions are chosen from Lucene's ranking alone: search, the next page and back where the goal's product is not on the
first, the goal's product when shown (else the first result), the goal's options that product has, Buy Now. The reward
each episode ends with is the stand-in's get_reward at recording (no upstream goal.py runs here).
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
TASKS = os.path.dirname(TESTS)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, TESTS)  # for the fixture
sys.path.insert(0, os.path.join(TASKS, "hflm", "standins"))  # the stand-in: its goals and reward are what is pinned

import fixture_smoke_webshop  # noqa: E402
from hflm import webshop, webshop_assets  # noqa: E402

OUT = os.path.join(HERE, "webshop_lucene.json")
K = 50  # upstream's SEARCH_RETURN_N
EPISODES = 60
JARS = ("lucene-core-8", "lucene-analyzers-common-8")
# Queries beyond the episodes' for the analyser's edge cases: possessives, stop words, stemming, numbers, punctuation,
# Unicode, a repeated word (a boosted clause), a token longer than StandardTokenizer's 255 characters.
QUERIES = [
    "women's wool coat", "Women's Wool COAT'S", "the coat's collar", "kid’s cotton shirts", "men＇s jackets",
    "a coat for the winter", "the of a and", "not a dress", "it is what it is", "to be or not to be",
    "dresses", "dressing dressed dress", "jackets jacketed", "sweaters sweating sweated", "skirts skirting",
    "coats coating coated", "shirts shirted", "linens linen", "silky silk silks", "denims",
    "relational conditional rational", "generalization generalize", "possibly technology technological",
    "running runner runs ran", "happiness happily happy", "xs us is as", "size 10 coat", "under 40.00 dollars",
    "price lower than 30.00 dollars", "1,000 3.5oz 2x 10-pack", "x-large", "x large", "u.s.a. e-mail o'neil",
    "wool-coat red/blue", "coat, jacket; dress: skirt!", "cotton cotton cotton shirt", "wool wool coat coat coat",
    "café naïve Über", "東京 コート セーター", "wool " + "x" * 300 + " coat", "user@example.com http://shop.example/coat",
    "$40 #1 50% 3:30", "red", "grey", "medium small large", "kalo", "everyday wear", "made to last",
    "machine wash cold", "fabric",
]
# A second, small index of its own: the queries above as documents (unlowered: "COAT'S"), and documents of many lengths
# (Lucene's one-byte norms keep lengths from 24 on to 4 significant bits) made of words that repeat.
EDGE_WORDS = ("gift wool coat cotton shirt dresses dressing red blue the of running runner's size 10 x-large "
              "café 3.5oz").split()
EDGE_LENGTHS = (1, 2, 5, 10, 23, 24, 25, 27, 40, 41, 100, 101, 104, 120, 300, 1000)


def edge_documents():
    import random

    rng = random.Random("webshop-lucene-edge")
    docs = [{"id": f"e{i:03d}", "contents": q} for i, q in enumerate(QUERIES)]
    for n in EDGE_LENGTHS:
        for copy in ("a", "b"):  # two documents of each length: ties broken by id
            words = [rng.choice(EDGE_WORDS) for _ in range(n)] if copy == "a" else docs[-1]["contents"].split(" ")[::-1]
            docs.append({"id": f"l{n:04d}{copy}", "contents": " ".join(words)})
    return docs


def lucene_classpath():
    jars = sorted(j for j in glob.glob("/usr/share/java/lucene-*.jar") if os.path.basename(j).startswith(JARS))
    if len(jars) != len(JARS):
        sys.exit("Lucene 8's core and analyzers-common jars are not in /usr/share/java: apt-get install liblucene8-java")
    return os.pathsep.join(jars)


def lucene_version(classpath):
    import zipfile

    core = next(j for j in classpath.split(os.pathsep) if "lucene-core" in j)
    with zipfile.ZipFile(core) as z:
        manifest = z.read("META-INF/MANIFEST.MF").decode()
    return next(line.split(":", 1)[1].strip() for line in manifest.splitlines() if line.startswith("Specification-Version"))


def search_with_lucene(documents, queries, classpath):
    """{query: {"query", "terms", "hits"}} as Lucene's WebShopLucene.java finds them in the documents file."""
    folder = tempfile.mkdtemp(prefix="webshop-lucene-")
    try:
        path = os.path.join(folder, "queries.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(q + "\n" for q in queries))
        done = subprocess.run(["java", "-cp", classpath, os.path.join(HERE, "WebShopLucene.java"), documents, path, str(K)],
                              capture_output=True, text=True, encoding="utf-8", check=False)
        if done.returncode != 0:
            sys.exit(f"WebShopLucene failed: {done.stderr.strip()[-2000:]}")
        rows = [json.loads(line) for line in done.stdout.splitlines()]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert [r["query"] for r in rows] == list(queries)
    return {r["query"]: r for r in rows}


def episode_query(i, goal, product):
    """The episode's search text: the instruction itself, or words of the product in forms the analyser must handle."""
    words = product["Title"].lower().split()
    brand, material, kind = words[0], words[1], words[2]
    colour, size = (list(goal["goal_options"].values()) + ["", ""])[:2]
    forms = [
        goal["instruction_text"],
        f"{material} {kind}",
        f"{brand}'s {material} {kind}s",
        f"a {material} {kind} for the {colour} look",
        f"{kind}s in {size}, under {goal['price_upper']:.2f} dollars",
        f"{goal['query']} {' '.join(goal['attributes'])}",
    ]
    return forms[i % len(forms)].lower()  # what the env searches: the action's text lower-cased


def episode_actions(query, hits, goal, products):
    """The scripted actions of an episode, from Lucene's ranking alone."""
    ids = [asin for asin, _score in hits]
    actions = [f"search[{query}]"]
    if goal["asin"] not in ids[:10] and len(ids) > 10:
        actions += ["click[next >]", "click[< prev]"]
    shown = ids[:10]
    if not shown:
        return actions
    target = goal["asin"] if goal["asin"] in shown else shown[0]
    actions.append(f"click[{target.lower()}]")
    offered = {v for values in products[target]["options"].values() for v in values}
    actions += [f"click[{v}]" for v in goal["goal_options"].values() if v in offered]
    return actions + ["click[buy now]"]


def main():
    classpath = lucene_classpath()
    hub = fixture_smoke_webshop.write(tempfile.mkdtemp(prefix="webshop-hub-"))
    try:
        variant = webshop.VARIANTS["webshop"]
        root = os.path.join(hub, fixture_smoke_webshop.DATA, "..")
        webshop_assets.write_index_documents(root, variant)
        documents = os.path.join(root, "search_engine", webshop.INDEX_RESOURCES[variant.num_products], "documents.jsonl")
        with open(documents, "rb") as f:
            documents_sha256 = hashlib.sha256(f.read()).hexdigest()
        env = webshop.open_server(root, variant)
        products = env.server.product_item_dict
        goals = env.server.goals
        queries = [episode_query(i, goals[i], products[goals[i]["asin"]]) for i in range(EPISODES)]
        recorded = search_with_lucene(documents, list(dict.fromkeys(queries + QUERIES)), classpath)
        edge = edge_documents()
        edge_path = os.path.join(hub, "edge.jsonl")
        with open(edge_path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in edge))
        edge_queries = QUERIES + EDGE_WORDS + ["gift wool coat", "the", "coat's dresses 10 café"]
        edge_recorded = search_with_lucene(edge_path, list(dict.fromkeys(edge_queries)), classpath)
        episodes = []
        for i, query in enumerate(queries):
            actions = episode_actions(query, recorded[query]["hits"], goals[i], products)
            env.reset(session=i)
            reward = 0.0
            for action in actions:
                _obs, reward, _done, _ = env.step(action)
            episodes.append({"goal_index": i, "instruction_text": goals[i]["instruction_text"], "actions": actions,
                             "reward": reward})
        fixture = {
            "recorded_by": "tasks/hflm-tests/upstream/record_webshop_lucene.py (WebShopLucene.java)",
            "lucene": lucene_version(classpath),
            "upstream": "pyserini 0.17 (Anserini 0.14, Lucene 8.11): DefaultEnglishAnalyzer, BM25(0.9, 0.4), "
                        "BagOfWordsQueryGenerator, ties by id; scores before ScoreTiesAdjusterReranker's rounding",
            "documents": {"variant": "webshop", "sha256": documents_sha256, "count": len(products)},
            "k": K,
            "searches": [recorded[q] for q in dict.fromkeys(queries + QUERIES)],
            "episodes": episodes,
            "edge_documents": edge,
            "edge_searches": list(edge_recorded.values()),
        }
        lists = ("searches", "episodes", "edge_documents", "edge_searches")
        with open(OUT, "w", encoding="utf-8") as f:  # one line per list item: a re-recording's diff reads
            f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                                       for k, v in fixture.items() if k not in lists))
            for key in lists:
                f.write(f',\n "{key}": [\n' + ",\n".join("  " + json.dumps(x, ensure_ascii=False) for x in fixture[key]) + "\n ]")
            f.write("\n}\n")
        print(f"{OUT}: {len(fixture['searches'])} searches, {len(episodes)} episodes, {len(edge)} edge documents, "
              f"{len(fixture['edge_searches'])} edge searches, Lucene {fixture['lucene']}")
    finally:
        shutil.rmtree(hub, ignore_errors=True)


if __name__ == "__main__":
    main()
