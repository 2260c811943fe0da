"""Records webshop_pages.json: upstream WebShop's own text env (web_agent_site at the commit it names: its SimServer,
Flask/Jinja templates, BeautifulSoup HTML-to-text, goals and get_reward) playing webshop_lucene.json's 60 episodes
over the fixture catalogue (each step's text observation and available actions, each episode's reward and its parts),
for tasks/hflm-tests/test_webshop_lucene.py to compare the stand-in with, step by step.

    python3 -m venv /tmp/wsvenv && PIP_RETRIES=0 /tmp/wsvenv/bin/pip install flask beautifulsoup4 jinja2 numpy rich tqdm
    /tmp/wsvenv/bin/python tasks/hflm-tests/upstream/record_webshop_pages.py \\
        --webshop <a checkout of princeton-nlp/WebShop> --thefuzz <a checkout of seatgeek/thefuzz at tag 0.19.0>

Upstream's web_agent_site runs unchanged, from the checkout. What it imports but cannot have here is replaced by a
module of the same name before it is imported (install_stubs): pyserini's LuceneSearcher answers from
webshop_lucene.json's recorded Lucene rankings (each query must be there); spaCy's model raises if called; gym's Env
is a bare base class and its register a no-op; the Selenium env (envs/web_agent_site_env.py) is left out; torch,
cleantext and rank_bm25 are never called on these paths. thefuzz is its 0.19.0 release, WebShop's pin, which without
python-Levenshtein runs difflib's SequenceMatcher. Upstream's title score (get_type_reward) needs spaCy's tagger: it
is the one function swapped, for one that gives r_type 1.0 and says so, so each recorded reward is upstream's
(attributes + options + price) / (their count + 1) before its type factor, and the done page shows that.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
TASKS = os.path.dirname(TESTS)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, TESTS)  # for the fixture

import fixture_smoke_webshop  # noqa: E402
from hflm import webshop  # noqa: E402

LUCENE = os.path.join(HERE, "webshop_lucene.json")
OUT = os.path.join(HERE, "webshop_pages.json")


class SpacyNeeded(RuntimeError):
    pass


def install_stubs(hits):
    """Modules upstream imports that cannot be installed here, each doing only what the recorded episodes need."""

    class Hit:
        def __init__(self, docid):
            self.docid = docid

    class Doc:
        def __init__(self, docid):
            self.docid = docid

        def raw(self):
            return json.dumps({"id": self.docid})

    class LuceneSearcher:  # pyserini's, answering from Lucene's recorded rankings
        def __init__(self, index_dir):
            pass

        def search(self, query, k=10):
            return [Hit(docid) for docid, _score in hits[query][:k]]

        def doc(self, docid):
            return Doc(docid)

    def nlp(_text):
        raise SpacyNeeded("spaCy's en_core_web_sm is not installed here")

    class Env:  # gym's
        pass

    stubs = {
        "pyserini": {}, "pyserini.search": {}, "pyserini.search.lucene": {"LuceneSearcher": LuceneSearcher},
        "spacy": {"load": lambda _name: nlp}, "torch": {}, "cleantext": {}, "rank_bm25": {"BM25Okapi": object},
        "gym": {"Env": Env}, "gym.envs": {}, "gym.envs.registration": {"register": lambda **_: None},
        # envs/__init__ imports the Selenium site env too; the text env is the one played.
        "web_agent_site.envs.web_agent_site_env": {"WebAgentSiteEnv": None},
    }
    for name, attributes in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module


def untyped_type_reward(purchased_product, goal):
    """get_type_reward without its spaCy title score: the type factor left at 1.0, marked as not computed."""
    return dict(r_type=1.0, query_match=None, category_match=None, title_score=None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--webshop", required=True, help="a checkout of princeton-nlp/WebShop (its web_agent_site)")
    parser.add_argument("--thefuzz", required=True, help="a checkout of seatgeek/thefuzz at tag 0.19.0")
    parser.add_argument("--commit", help="the WebShop commit checked out, where --webshop is no git work tree")
    args = parser.parse_args()
    with open(LUCENE, encoding="utf-8") as f:
        lucene = json.load(f)
    install_stubs({s["query"]: s["hits"] for s in lucene["searches"]})
    sys.path[:0] = [os.path.abspath(args.webshop), os.path.abspath(args.thefuzz)]
    from web_agent_site.engine import goal  # noqa: E402

    assert goal.__file__.startswith(os.path.abspath(args.webshop)), goal.__file__
    goal.get_type_reward = untyped_type_reward
    commit = args.commit or subprocess.run(["git", "-C", args.webshop, "rev-parse", "HEAD"], capture_output=True,
                                           text=True, check=False).stdout.strip()
    if not commit:
        sys.exit(f"{args.webshop} is no git work tree: name its WebShop commit with --commit")

    hub = fixture_smoke_webshop.write(tempfile.mkdtemp(prefix="webshop-hub-"))
    try:
        variant = webshop.VARIANTS["webshop"]
        root = os.path.join(hub, fixture_smoke_webshop.DATA, "..")
        # Searches come from the recording: the index folder open_server wants is only made to exist.
        os.makedirs(os.path.join(root, "search_engine", webshop.LUCENE_INDEXES[variant.num_products]), exist_ok=True)
        env = webshop.open_server(root, variant)
        episodes = []
        for episode in lucene["episodes"]:
            obs, _ = env.reset(session=episode["goal_index"])
            assert env.get_instruction_text() == "Instruction: " + episode["instruction_text"], episode
            observations, available, reward = [obs], [env.get_available_actions()], 0.0
            for action in episode["actions"]:
                obs, reward, _done, _ = env.step(action)
                observations.append(obs)
                available.append(env.get_available_actions())
            info = env.server.user_sessions[env.session]["verbose_info"]
            episodes.append({"goal_index": episode["goal_index"], "observations": observations,
                             "available_actions": available, "untyped_reward": reward,
                             "parts": {k: info.get(k) for k in ("r_att", "w_att", "r_option", "w_option", "r_price",
                                                                "w_price")}})
        fixture = {
            "recorded_by": "tasks/hflm-tests/upstream/record_webshop_pages.py",
            "upstream": f"princeton-nlp/WebShop {commit}: web_agent_site's WebAgentTextEnv (observation_mode text), "
                        "thefuzz 0.19.0 (difflib); search from webshop_lucene.json; get_type_reward (spaCy) not run",
            "lucene_sha256": hashlib.sha256(open(LUCENE, "rb").read()).hexdigest(),
            "episodes": episodes,
        }
        with open(OUT, "w", encoding="utf-8") as f:  # one line per episode: a re-recording's diff reads
            head = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in fixture.items() if k != "episodes")
            rows = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in episodes)
            f.write("{\n" + head + ',\n "episodes": [\n' + rows + "\n ]\n}\n")
        steps = sum(len(e["observations"]) for e in episodes)
        print(f"{OUT}: {len(episodes)} episodes, {steps} observations, upstream {commit}")
    finally:
        shutil.rmtree(hub, ignore_errors=True)


if __name__ == "__main__":
    main()
