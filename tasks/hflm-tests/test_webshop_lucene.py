"""Differential test of WebShop's search: the web_agent_site on the path against Lucene 8's recorded rankings.

    .venv-full/bin/python tasks/hflm-tests/test_webshop_lucene.py

upstream/webshop_lucene.json holds what upstream's search (pyserini 0.17's LuceneSearcher: Lucene's EnglishAnalyzer
via Anserini, BM25 k1 0.9 b 0.4, a bag-of-words query, ties by id) returned over the fixture catalogue's index
documents, recorded in Lucene itself by upstream/WebShopLucene.java (upstream/README.md): each query's analysed terms
and its 50 best documents with their scores, and 60 scripted episodes (search, pages, a product, its options, Buy Now)
whose actions were chosen from Lucene's ranking. The stand-in must give the same terms, the same ids in the same
order, the same scores (float32), and the same result pages in every episode. upstream/webshop_pages.json holds what
upstream's own text env (its templates, HTML-to-text and get_reward, thefuzz 0.19; search from the Lucene recording)
showed and paid in those episodes, recorded by upstream/record_webshop_pages.py: the stand-in must show every step's
observation and available actions as upstream, and pay as upstream before the type factor (spaCy's, not run there).
A real web_agent_site on the path (ahead of the stand-in) plays the episodes instead, and where pyserini imports its
LuceneSearcher is compared too.
"""

import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, HERE)  # for the fixtures
sys.path.append(os.path.join(TASKS, "hflm", "standins"))  # after site-packages: a real web_agent_site wins

import fixture_smoke_webshop  # noqa: E402
from hflm import webshop, webshop_assets  # noqa: E402

VARIANT = webshop.VARIANTS["webshop"]
RECORDED = os.path.join(HERE, "upstream", "webshop_lucene.json")
RERECORD = ".venv-full/bin/python tasks/hflm-tests/upstream/record_webshop_lucene.py"
HUB = ROOT = None
with open(RECORDED, encoding="utf-8") as f:
    LUCENE = json.load(f)
HITS = {s["query"]: s["hits"] for s in LUCENE["searches"]}
ASIN = re.compile(r"\[SEP\] (B0[0-9A-F]{8}) \[SEP\]")
ASIN_CLICK = re.compile(r"click\[b0[0-9a-f]{8}\]")


def setUpModule():
    global HUB, ROOT
    HUB = fixture_smoke_webshop.write(tempfile.mkdtemp(prefix="webshop-hub-"))
    ROOT = os.path.join(HUB, fixture_smoke_webshop.DATA, "..")
    webshop_assets.write_index_documents(ROOT, VARIANT)  # and pyserini's index of them, where pyserini imports


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)


def documents():
    return os.path.join(ROOT, "search_engine", webshop.INDEX_RESOURCES[VARIANT.num_products], "documents.jsonl")


class RecordingTest(unittest.TestCase):
    def test_the_recording_is_of_these_documents_and_enough_episodes(self):
        import hashlib

        with open(documents(), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        self.assertEqual(digest, LUCENE["documents"]["sha256"],
                         f"the fixture catalogue's index documents changed: record Lucene's rankings again ({RERECORD})")
        self.assertTrue(LUCENE["lucene"].startswith("8."), LUCENE["lucene"])
        self.assertGreaterEqual(len(LUCENE["episodes"]), 60)
        self.assertGreaterEqual(len(LUCENE["searches"]), 100)
        # The cases the analyser must get right are there: possessives, stop words alone, stems, numbers, a long token.
        terms = {s["query"]: s["terms"] for s in LUCENE["searches"]}
        self.assertEqual(terms["Women's Wool COAT'S"], ["women", "wool", "coat"])
        self.assertEqual(terms["the of a and"], [])
        self.assertEqual(terms["sweaters sweating sweated"], ["sweater", "sweat", "sweat"])
        self.assertEqual(terms["1,000 3.5oz 2x 10-pack"], ["1,000", "3.5oz", "2x", "10", "pack"])
        self.assertEqual([len(t) for t in terms["wool " + "x" * 300 + " coat"]], [4, 255, 45, 4])


@unittest.skipIf(importlib.util.find_spec("web_agent_site.engine.lucene") is None, "a real web_agent_site is first on the path")
class StandInSearchTest(unittest.TestCase):
    """The stand-in's own index (engine/lucene.py) against Lucene, query by query."""

    def differences(self, documents_path, searches):
        """({"terms", "ids", "scores": [queries where the stand-in differs from Lucene]}, hits compared)."""
        from web_agent_site.engine.lucene import LuceneBM25, analyse

        searcher = LuceneBM25(documents_path)
        differences = {"terms": [], "ids": [], "scores": []}
        compared = 0
        for search in searches:
            query, hits = search["query"], search["hits"]
            if analyse(query) != search["terms"]:
                differences["terms"].append(query)
            got = searcher.scored(query, k=LUCENE["k"])
            if [i for i, _ in got] != [i for i, _ in hits]:
                differences["ids"].append(query)
            elif not np.allclose([s for _, s in got], [s for _, s in hits], rtol=2 ** -23, atol=0):  # float32's epsilon
                differences["scores"].append(query)
            compared += len(hits)
        return differences, compared

    def test_terms_ranking_and_scores_are_lucenes_on_the_fixture_catalogue(self):
        differences, compared = self.differences(documents(), LUCENE["searches"])
        self.assertEqual(differences, {"terms": [], "ids": [], "scores": []})
        self.assertGreater(compared, 4000)

    def test_terms_ranking_and_scores_are_lucenes_on_documents_of_many_lengths_and_forms(self):
        folder = tempfile.mkdtemp(prefix="webshop-edge-")
        self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
        path = os.path.join(folder, "documents.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in LUCENE["edge_documents"]))
        differences, compared = self.differences(path, LUCENE["edge_searches"])
        self.assertEqual(differences, {"terms": [], "ids": [], "scores": []})
        self.assertGreater(compared, 500)


class EpisodesTest(unittest.TestCase):
    """The 60 recorded episodes played on the web_agent_site on the path: each results page lists Lucene's ranking."""

    def test_every_results_page_is_lucenes_ranking_and_the_rewards_are_the_recorded(self):
        env = webshop.open_server(ROOT, VARIANT)
        pages = 0
        for episode in LUCENE["episodes"]:
            obs, _ = env.reset(session=episode["goal_index"])
            self.assertEqual(env.get_instruction_text(), "Instruction: " + episode["instruction_text"])
            ids, page, done, reward = [], 1, False, 0.0
            for action in episode["actions"]:
                obs, reward, done, _ = env.step(action)
                if action.startswith("search["):
                    ids, page = [i for i, _ in HITS[action[len("search["):-1]]], 1
                elif action in ("click[next >]", "click[< prev]"):
                    page += 1 if action == "click[next >]" else -1
                else:
                    continue
                shown = ids[(page - 1) * 10:page * 10]
                where = f"goal {episode['goal_index']}, {action}, page {page}"
                self.assertIn(f"Page {page} (Total results: {len(ids)})", obs, where)
                self.assertEqual(ASIN.findall(obs), shown, where)
                self.assertEqual([c for c in env.get_available_actions()["clickables"] if c.startswith("b0")],
                                 [i.lower() for i in shown], where)
                pages += 1
            self.assertTrue(done, episode)
            self.assertEqual(reward, episode["reward"], episode)
        self.assertGreaterEqual(pages, 80)
        self.assertGreater(sum(e["reward"] == 1.0 for e in LUCENE["episodes"]), 10)


def first_difference(got, recorded):
    """The first [SEP]-separated text where an observation differs from upstream's: (index, got's, upstream's)."""
    got, recorded = got.split(" [SEP] "), recorded.split(" [SEP] ")
    i = next((i for i, (a, b) in enumerate(zip(got, recorded)) if a != b), min(len(got), len(recorded)))
    return i, got[i] if i < len(got) else None, recorded[i] if i < len(recorded) else None


class UpstreamPagesTest(unittest.TestCase):
    """The 60 episodes against upstream's own text env's recording (upstream/webshop_pages.json): every step's
    observation and available actions, each purchase's reward parts, and its reward before the (spaCy) type factor."""

    def test_every_step_is_upstreams_page_and_every_reward_upstreams(self):
        import hashlib

        with open(os.path.join(HERE, "upstream", "webshop_pages.json"), encoding="utf-8") as f:
            pages = json.load(f)
        with open(RECORDED, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), pages["lucene_sha256"],
                             "webshop_lucene.json changed: record upstream's pages again (upstream/README.md)")
        env = webshop.open_server(ROOT, VARIANT)
        steps = whole = 0
        for episode, recorded in zip(LUCENE["episodes"], pages["episodes"], strict=True):
            self.assertEqual(episode["goal_index"], recorded["goal_index"])
            obs, _ = env.reset(session=episode["goal_index"])
            observations, available, reward = [obs], [env.get_available_actions()], 0.0
            for action in episode["actions"]:
                obs, reward, _done, _ = env.step(action)
                observations.append(obs)
                available.append(env.get_available_actions())
            for step, (got, want) in enumerate(zip(observations, recorded["observations"], strict=True)):
                where = f"goal {episode['goal_index']}, after {(['reset'] + episode['actions'])[step]}"
                self.assertEqual(got, want, f"{where}: first difference {first_difference(got, want)}")
            self.assertEqual(available, recorded["available_actions"], f"goal {episode['goal_index']}")
            info = env.server.user_sessions[env.session]["verbose_info"]
            self.assertEqual({k: info.get(k) for k in recorded["parts"]}, recorded["parts"], episode["goal_index"])
            self.assertAlmostEqual(reward, recorded["untyped_reward"] * info["r_type"], places=12,
                                   msg=episode["goal_index"])
            # Buying the goal's own product, upstream's type factor is 1 whatever spaCy tags (the same title): the
            # whole reward is upstream's there.
            bought = next(a for a in episode["actions"] if ASIN_CLICK.fullmatch(a))[len("click["):-1]
            if bought.upper() == env.server.goals[episode["goal_index"]]["asin"]:
                self.assertEqual(reward, recorded["untyped_reward"], episode["goal_index"])
                whole += 1
            steps += len(observations)
        self.assertEqual((steps, whole), (393, 33))


@unittest.skipIf(importlib.util.find_spec("pyserini") is None, "pyserini does not import here")
class PyseriniTest(unittest.TestCase):
    """Where pyserini imports, its LuceneSearcher over the index prepare built ranks as the recording."""

    def test_pyserinis_rankings_are_the_recorded(self):
        from pyserini.search.lucene import LuceneSearcher

        searcher = LuceneSearcher(os.path.join(ROOT, "search_engine", webshop.LUCENE_INDEXES[VARIANT.num_products]))
        for search in LUCENE["searches"]:
            hits = searcher.search(search["query"], k=LUCENE["k"])
            self.assertEqual([h.docid for h in hits], [i for i, _ in search["hits"]], search["query"])
            # Anserini's ScoreTiesAdjusterReranker rounds scores to 1e-4 and lowers each tie by 1e-6.
            self.assertTrue(np.allclose([h.score for h in hits], [s for _, s in search["hits"]], atol=1e-4 + 1e-6 * len(hits)))


if __name__ == "__main__":
    unittest.main()
