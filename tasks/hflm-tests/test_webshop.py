"""Tests of webshop's adapter (hflm.webshop), its assets and rollouts, and the stand-in against upstream's API.

    .venv-full/bin/python tasks/hflm-tests/test_webshop.py

UpstreamSurfaceTest pins what hflm.webshop relies on, as read from the upstream sources (princeton-nlp/WebShop
web_agent_site/envs/web_agent_text_env.py, engine/engine.py, engine/goal.py, utils.py, tests/web-agent-site/engine/
test_goal.py; RD-Agent autorl_bench benchmarks/webshop/eval.py): the stand-in must keep it. A real web_agent_site on
the path is imported first, but the fixture's WebShop roots hold index documents, not pyserini's Lucene index, so
only the name and signature tests could pass against it.
"""

import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
STANDINS = os.path.join(TASKS, "hflm", "standins")
sys.path.insert(0, TASKS)  # for hflm
sys.path.insert(0, HERE)  # for the fixtures
sys.path.append(STANDINS)  # after site-packages: a real web_agent_site wins

import fixture_smoke_webshop  # noqa: E402
from hflm import assets, webshop  # noqa: E402

HUB = HOME = None
VARIANT = webshop.VARIANTS["webshop"]


def setUpModule():
    global HUB, HOME
    HUB = fixture_smoke_webshop.write(tempfile.mkdtemp(prefix="webshop-hub-"))
    fixture_smoke_webshop.write_tiny_model(HUB)
    HOME = tempfile.mkdtemp(prefix="webshop-home-")
    assets.prepare("webshop", HOME, fixture_smoke_webshop.TINY_MODEL, HUB)


def tearDownModule():
    shutil.rmtree(HUB, ignore_errors=True)
    shutil.rmtree(HOME, ignore_errors=True)


def root(part="data"):
    """The visible (data) or hidden (eval) WebShop root of the prepared webshop assets."""
    return os.path.join(HOME, "assets", "webshop", part, "webshop")


def rows(*path):
    with open(os.path.join(HOME, "assets", "webshop", *path)) as f:
        return [json.loads(line) for line in f]


class UpstreamSurfaceTest(unittest.TestCase):
    def test_names_and_signatures_are_upstreams(self):
        from web_agent_site.engine import engine, goal
        from web_agent_site.envs import WebAgentTextEnv
        from web_agent_site.envs.web_agent_text_env import SimServer
        from web_agent_site import utils

        init = inspect.signature(WebAgentTextEnv.__init__).parameters
        self.assertEqual(list(init)[1:], ["observation_mode", "file_path", "server", "kwargs"])
        self.assertEqual(init["observation_mode"].default, "html")
        self.assertEqual(init["file_path"].default, utils.DEFAULT_FILE_PATH)
        self.assertEqual(list(inspect.signature(WebAgentTextEnv.reset).parameters)[1:], ["session", "instruction_text"])
        self.assertEqual(list(inspect.signature(WebAgentTextEnv.step).parameters)[1:], ["action"])
        self.assertEqual(list(inspect.signature(SimServer.__init__).parameters)[1:],
                         ["base_url", "file_path", "filter_goals", "limit_goals", "num_products", "human_goals", "show_attrs"])
        self.assertEqual(list(inspect.signature(goal.get_reward).parameters), ["purchased_product", "goal", "price", "options", "kwargs"])
        self.assertEqual(list(inspect.signature(engine.load_products).parameters), ["filepath", "num_products", "human_goals"])
        self.assertEqual((engine.SEARCH_RETURN_N, engine.PRODUCT_WINDOW), (50, 10))
        self.assertEqual((engine.END_BUTTON, engine.NEXT_PAGE, engine.PREV_PAGE, engine.BACK_TO_SEARCH),
                         ("Buy Now", "Next >", "< Prev", "Back to Search"))
        self.assertEqual(set(engine.ACTION_TO_TEMPLATE), {"Description", "Features", "Reviews", "Attributes"})
        for name in ("items_ins_v2_1000.json", "items_shuffle_1000.json", "items_human_ins.json"):
            self.assertTrue(any(p.endswith("/data/" + name) for p in (utils.DEFAULT_ATTR_PATH, utils.DEFAULT_FILE_PATH, utils.HUMAN_ATTR_PATH)))
        self.assertEqual(engine.parse_action("search[red shoes]"), ("search", "red shoes"))
        self.assertEqual(engine.parse_action("click[< Prev]"), ("click", "< Prev"))
        self.assertEqual(engine.parse_action("look"), ("look", None))

    def test_pages_actions_and_a_purchase_as_upstream(self):
        env = webshop.open_server(root("eval"), VARIANT)
        goal = env.server.goals[0]
        obs, info = env.reset(session=0)
        self.assertIsNone(info)
        self.assertEqual(obs, f"WebShop [SEP] Instruction: [SEP] {goal['instruction_text']} [SEP] Search")
        self.assertEqual(env.get_instruction_text(), f"Instruction: {goal['instruction_text']}")
        self.assertEqual(env.get_available_actions(), {"has_search_bar": True, "clickables": ["search"]})
        # Anything but search[...] or click[<a clickable>] changes nothing, "click[search]" included.
        for action in ("buy it", "click[buy now]", "click[search]", "search[]"):
            self.assertEqual(env.step(action), (obs, 0, False, None))
        product = env.server.product_item_dict[goal["asin"]]
        words = product["Title"].lower().split(" for ")[0]
        obs, reward, done, _ = env.step(f"search[{words}]")
        self.assertEqual((reward, done), (0.0, False))
        self.assertTrue(obs.startswith(f"Instruction: [SEP] {goal['instruction_text']} [SEP] Back to Search [SEP] Page 1 (Total results: "))
        clickables = env.get_available_actions()["clickables"]
        self.assertEqual(clickables[:2], ["back to search", "next >"])
        self.assertEqual(clickables[2], goal["asin"].lower())  # its own words find the product first
        self.assertEqual(len(clickables), 2 + 10)
        self.assertIn(f"[SEP] {goal['asin']} [SEP] {product['Title']} [SEP] {product['Price']}", obs)
        self.assertIn("< prev", env.step("click[next >]") and env.get_available_actions()["clickables"])
        env.step("click[< prev]")
        obs, _, _, _ = env.step(f"click[{goal['asin'].lower()}]")
        available = env.get_available_actions()["clickables"]
        self.assertEqual(available[:6], ["back to search", "< prev", "description", "features", "reviews", "buy now"])
        self.assertEqual(available[6:], [v for values in product["options"].values() for v in values])
        self.assertIn(f"[SEP] {product['Title']} [SEP] Price: {product['Price']} [SEP] Rating: N.A. [SEP] Description", obs)
        self.assertTrue(obs.endswith("Reviews [SEP] Buy Now"))
        self.assertIn(product["Description"], env.step("click[description]")[0])
        env.step("click[< prev]")
        for value in goal["goal_options"].values():
            env.step(f"click[{value}]")
        self.assertEqual(env.server.user_sessions[env.session]["options"], goal["goal_options"])
        obs, reward, done, _ = env.step("click[Buy Now]")  # upstream lower-cases the argument
        self.assertEqual((reward, done), (1.0, True))
        self.assertIn("Thank you for shopping with us!", obs)

    def test_goals_are_upstreams_synthetic_goals_in_a_fixed_order(self):
        from web_agent_site.engine import engine

        env = webshop.open_server(root("eval"), VARIANT)
        products, *_ = engine.load_products(os.path.join(root("eval"), "data", VARIANT.products), num_products=1000, human_goals=False)
        combos = sum(len(p["options"]["color"]) * len(p["options"]["size"]) for p in products)
        self.assertEqual(len(env.server.goals), combos)  # a goal per product and combination of options
        g = env.server.goals[0]
        self.assertRegex(g["instruction_text"], r"^i need a \w+ \w+ from \w+ with color: [\w-]+, and size: [\w-]+, and price lower than \d+\.00 dollars$")
        self.assertEqual(sorted(g), ["asin", "attributes", "category", "goal_options", "instruction_text", "name", "price_upper",
                                     "product_category", "query", "weight"])
        again = webshop.open_server(root("eval"), VARIANT)
        self.assertEqual([x["instruction_text"] for x in again.server.goals], [x["instruction_text"] for x in env.server.goals])

    def test_rewards_as_upstreams_formula(self):
        from web_agent_site.engine.goal import get_reward, get_type_reward, token_set_ratio

        env = webshop.open_server(root("eval"), VARIANT)
        goal = env.server.goals[0]
        product = env.server.product_item_dict[goal["asin"]]
        price = env.server.product_prices[goal["asin"]]
        self.assertEqual(get_reward(product, goal, price, dict(goal["goal_options"])), 1.0)
        # Attribute 1 of 1, options 1 of 2, price: 3 of 4.
        one_option = dict(list(goal["goal_options"].items())[:1])
        self.assertEqual(get_reward(product, goal, price, one_option), 0.75)
        reward, info = get_reward(product, goal, goal["price_upper"] + 1, {}, verbose=True)
        self.assertEqual((reward, info["r_price"], info["r_option"]), (0.25, False, 0.0))
        # upstream's tests/web-agent-site/engine/test_goal.py, its category cases
        g = {"query": "Query 1", "product_category": "a › b › c", "name": "Name 1"}
        p = dict(g)
        self.assertEqual(get_type_reward(p, g), {"r_type": 1.0, "query_match": True, "category_match": True, "title_score": 1.0})
        for category, match in (("b › c › a", True), ("d › e › f", False), ("a › d › b", True), ("a › a › b", True), ("a › a › d", False)):
            self.assertEqual(get_type_reward({**p, "product_category": category}, g)["category_match"], match, category)
        # thefuzz's documented token_set_ratio examples
        self.assertEqual(token_set_ratio("fuzzy was a bear", "fuzzy fuzzy was a bear"), 100)
        self.assertEqual(token_set_ratio("new york mets vs atlanta braves", "atlanta braves vs new york mets"), 100)
        self.assertLess(token_set_ratio("cotton", "wool"), 85)


class LuceneSearchTest(unittest.TestCase):
    """The stand-in's search as pyserini's LuceneSearcher over upstream's index (Lucene 8's EnglishAnalyzer and BM25,
    k1 0.9, b 0.4): expected terms from Lucene's StandardTokenizer, EnglishPossessiveFilter, StopFilter and
    PorterStemmer (Porter's reference algorithm); rankings worked out by hand from Lucene's formula."""

    def searcher(self, documents):
        from web_agent_site.engine.lucene import LuceneBM25

        folder = tempfile.mkdtemp(prefix="webshop-index-")
        self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
        path = os.path.join(folder, "documents.jsonl")
        with open(path, "w") as f:
            for doc_id, contents in documents:
                f.write(json.dumps({"id": doc_id, "contents": contents}) + "\n")
        return LuceneBM25(path)

    def test_the_analyser_is_lucenes_english_analyser(self):
        from web_agent_site.engine.lucene import analyse

        self.assertEqual(analyse("Women's Running Shoes, for the 3.5oz T-shirt"), ["women", "run", "shoe", "3.5oz", "t", "shirt"])
        self.assertEqual(analyse("U.S.A. don't 1,000 cat\u2019s it's"), ["u.s.a", "don't", "1,000", "cat"])
        # Porter's reference algorithm as Lucene's PorterStemmer has it, not Snowball's "porter": -bli, -logi, two letters.
        self.assertEqual(analyse("possibly technology technological xs us"), ["possibl", "technolog", "technolog", "xs", "us"])

    def test_stemming_changes_what_a_query_finds_and_in_which_order(self):
        search = self.searcher([("b1", "red shoe"), ("a1", "a pair of red running shoes"), ("c1", "runner's rack")]).search
        # Unstemmed, "shoes" would find a1 only and "running" nothing but a1; stemmed they find the singular and "run".
        self.assertEqual(search("shoes"), ["b1", "a1"])  # b1 is shorter: BM25's length normalisation
        self.assertEqual(search("shoe"), ["b1", "a1"])
        self.assertEqual(search("run shoe"), ["a1", "b1"])
        self.assertEqual(search("the of a"), [])  # stop words only: no clause, no hit
        self.assertEqual(search("runners"), ["c1"])

    def test_ties_go_to_the_smaller_id_and_lengths_are_lucenes_one_byte_norms(self):
        from web_agent_site.engine.lucene import LENGTH_TABLE, encode_length

        search = self.searcher([("z9", "blue mug"), ("a2", "blue mug"), ("m5", "blue")]).search
        self.assertEqual(search("mug"), ["a2", "z9"])
        self.assertEqual(search("blue", k=2), ["m5", "a2"])
        # SmallFloat.intToByte4: lengths below 24 exact, then 4 significant bits, so 100 and 101 are both stored as 96.
        self.assertEqual([LENGTH_TABLE[encode_length(n)] for n in (23, 24, 100, 101, 1000)], [23, 24, 96, 96, 984])
        long_a = " ".join(["gift"] + ["word%d" % i for i in range(99)])
        long_b = " ".join(["gift"] + ["word%d" % i for i in range(100)])
        self.assertEqual(self.searcher([("y", long_a), ("x", long_b)]).search("gift"), ["x", "y"])  # same norm: a tie

    def test_repeated_query_words_weigh_more_as_anserinis_bag_of_words_boosts_them(self):
        search = self.searcher([("y", "cup tea"), ("x", "green tea")]).search
        self.assertEqual(search("green cup"), ["x", "y"])  # equal scores: the smaller id first
        self.assertEqual(search("cup green cup"), ["y", "x"])
        self.assertEqual(search("green green cup"), ["x", "y"])


class ReferenceLoopTest(unittest.TestCase):
    def test_prompt_chat_and_history_are_the_references(self):
        history = [(f"a{i}", f"o{i}") for i in range(1, 8)]
        prompt = webshop.react_prompt("Instruction: x", history, "now", "  search[<your query>]")
        self.assertTrue(prompt.startswith("You are shopping on an e-commerce website. Find and purchase a product matching "
                                          "the user's instruction.\n\nInstruction: Instruction: x\n\nAvailable actions:\n"
                                          "  search[<your query>]\n\nRules:\n- Output ONLY one action"))
        self.assertTrue(prompt.endswith("Now it's your turn:\n\nObservation 3: o3\nAction 3: a3\n\nObservation 4: o4\nAction 4: a4\n\n"
                                        "Observation 5: o5\nAction 5: a5\n\nObservation 6: o6\nAction 6: a6\n\nObservation 7: o7\n"
                                        "Action 7: a7\n\nObservation 8: now\nAction 8:"))
        self.assertEqual(webshop.format_available_actions({"has_search_bar": False, "clickables": ["back to search", "b01"]}),
                         "  click[back to search]\n  click[b01]")
        self.assertEqual(webshop.messages("p"), [{"role": "system", "content": webshop.SYSTEM}, {"role": "user", "content": "p"}])
        self.assertEqual([webshop.clean_action(t) for t in (" Action: search[x] ", "choose[Buy Now]", "click[b01]")],
                         ["search[x]", "click[Buy Now]", "click[b01]"])
        self.assertEqual((webshop.GENERATION.max_new_tokens, webshop.GENERATION.temperature, webshop.GENERATION.stop,
                          webshop.GENERATION.chat_template, webshop.MAX_STEPS), (100, 0.0, ("\n",), True, 50))

    def test_lockstep_play_scores_as_the_reference(self):
        env = webshop.open_server(root("eval"), VARIANT)
        goals = [0, 1, 0]
        chats = []

        def expert(batch):  # goal 0's episodes buy their product with its options; goal 1's never buys
            chats.append(batch)
            step = len(chats) - 1
            out = []
            for chat in batch:
                g = env.server.goals[0]
                user = chat[1]["content"]
                if "Instruction: " + g["instruction_text"] not in user:
                    out.append("search[nothing]\n")
                    continue
                plan = [f"search[{env.server.product_item_dict[g['asin']]['Title'].lower().split(' for ')[0]}]",
                        f"click[{g['asin'].lower()}]", *[f"click[{v}]" for v in g["goal_options"].values()], "Action: choose[Buy Now]"]
                out.append(plan[step] + "\n")
            return out

        episodes = webshop.play(env, goals, expert, VARIANT, max_steps=6)
        self.assertEqual([e["goal_index"] for e in episodes], goals)
        won, lost = episodes[0], episodes[1]
        self.assertEqual((won["reward"], won["won"], won["done"], won["steps"]), (1.0, True, True, 5))
        self.assertEqual(won["actions"][-1], "click[Buy Now]")
        self.assertEqual(episodes[2]["actions"], won["actions"])
        self.assertEqual((lost["reward"], lost["won"], lost["done"], lost["steps"]), (0.0, False, False, 6))
        self.assertEqual(len(won["observations"]), won["steps"] + 1)
        self.assertEqual(len(chats[-1]), 1)  # only the episode still running is asked
        self.assertEqual(webshop.step_messages(won, 2), chats[2][0])
        self.assertEqual(webshop.success_rate(episodes), (66.67, 2, 3))
        self.assertEqual(webshop.mean_reward(episodes), 0.6667)


class AssetsTest(unittest.TestCase):
    def test_train_goals_visible_evaluation_goals_hidden_and_halved(self):
        self.assertEqual(assets.verify("webshop", HOME, fixture_smoke_webshop.TINY_MODEL), [])
        with open(os.path.join(HOME, "assets", "webshop", "manifest.json")) as f:
            manifest = json.load(f)
        public, private, train = rows("eval", "public.jsonl"), rows("eval", "private.jsonl"), rows("data", "train.jsonl")
        self.assertEqual(len(public) + len(private), 100)
        self.assertEqual(sorted(r["goal_index"] for r in public + private), list(range(100)))
        self.assertEqual(manifest["goals"]["train"], len(train))
        evaluated = {r["instruction_text"] for r in public + private}
        hidden = {r["asin"] for r in public + private}
        self.assertFalse(evaluated & {r["instruction_text"] for r in train})
        self.assertFalse(hidden & {r["asin"] for r in train})
        # The visible files hold no instruction of a hidden product, and nothing names an evaluation goal.
        with open(os.path.join(root("data"), "data", VARIANT.attributes)) as f:
            visible = json.load(f)
        self.assertFalse([a for a in hidden if "instruction" in visible[a] or "instruction_attributes" in visible[a]])
        self.assertEqual(sum("instruction" not in v for v in visible.values()), manifest["goals"]["hidden_products"])
        self.assertEqual(manifest["goals"]["hidden_products"], 2 * len(hidden))  # as many decoys
        for name in [p for p in manifest["files"] if p.startswith("data/")]:
            with open(os.path.join(HOME, "assets", "webshop", name), encoding="utf-8") as f:
                text = f.read()
            self.assertFalse([t for t in evaluated if t in text][:1], name)
        env = webshop.open_server(root("data"), VARIANT)
        self.assertEqual([g["instruction_text"] for g in env.server.goals], [r["instruction_text"] for r in train])

    def test_the_human_variant_hides_the_papers_test_goals(self):
        home = tempfile.mkdtemp(prefix="webshop-home-")
        try:
            assets.prepare("webshop-human", home, fixture_smoke_webshop.TINY_MODEL, HUB)
            base = os.path.join(home, "assets", "webshop-human")
            with open(os.path.join(base, "manifest.json")) as f:
                manifest = json.load(f)
            self.assertEqual(manifest["goals"]["public"] + manifest["goals"]["private"], 500)
            self.assertEqual(manifest["variant"], {"task": "webshop-human", "products": "items_shuffle.json",
                                                   "attributes": "items_ins_v2.json", "num_products": None,
                                                   "human_goals": True, "eval_goals": 500, "success": 1.0,
                                                   "headline": "mean_reward"})
            with open(os.path.join(base, "data", "webshop", "data", "items_human_ins.json")) as f:
                visible = json.load(f)
            with open(os.path.join(base, "eval", "public.jsonl")) as f:
                public = [json.loads(line) for line in f]
            self.assertFalse([r for r in public if r["asin"] in visible])
            self.assertTrue(public[0]["instruction_text"].startswith("I am looking for a "))
            self.assertTrue(os.path.isfile(os.path.join(base, "data", "webshop", "search_engine", "resources", "documents.jsonl")))
            # Where pyserini imports, prepare builds its Lucene index; here it cannot.
            if importlib.util.find_spec("pyserini") is None:
                self.assertTrue(manifest["lucene_index"].startswith("not built: pyserini does not import here"))
        finally:
            shutil.rmtree(home, ignore_errors=True)

    def test_a_changed_file_is_found_and_a_missing_data_file_refused(self):
        home, hub = tempfile.mkdtemp(prefix="webshop-home-"), tempfile.mkdtemp(prefix="webshop-hub-")
        try:
            shutil.copytree(HUB, hub, dirs_exist_ok=True)
            assets.prepare("webshop", home, fixture_smoke_webshop.TINY_MODEL, hub)
            with open(os.path.join(home, "assets", "webshop", "data", "train.jsonl"), "a") as f:
                f.write("\n")
            self.assertTrue(any("has changed" in p for p in assets.verify("webshop", home)))
            os.unlink(os.path.join(hub, fixture_smoke_webshop.DATA, "items_ins_v2_1000.json"))
            with self.assertRaisesRegex(assets.AssetsError, "items_ins_v2_1000.json is missing: copy WebShop's data file"):
                assets.prepare("webshop", home, fixture_smoke_webshop.TINY_MODEL, hub)
            self.assertEqual(assets.verify("webshop", home)[-1:], [p for p in assets.verify("webshop", home) if "has changed" in p])
        finally:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(hub, ignore_errors=True)


class RolloutsTest(unittest.TestCase):
    def test_episodes_of_train_goals_with_the_envs_rewards(self):
        out_dir = tempfile.mkdtemp(prefix="webshop-rollouts-")
        try:
            base = os.path.join(HOME, "models", fixture_smoke_webshop.TINY_MODEL.replace("/", "--"))
            out = os.path.join(out_dir, "batch.jsonl")
            done = subprocess.run(
                [sys.executable, "-m", "hflm.rollouts", "--task", "webshop", "--checkpoint", base, "--base", base,
                 "--data", os.path.join(HOME, "assets", "webshop", "data", "train.jsonl"), "--n", "4",
                 "--group-size", "2", "--temperature", "0", "--threads", "1", "--out", out],
                env={**os.environ, "PYTHONPATH": os.pathsep.join([TASKS, STANDINS])}, capture_output=True, text=True, timeout=600)
            self.assertEqual(done.returncode, 0, done.stderr)
            summary = json.loads(done.stdout.strip().splitlines()[-1])
            with open(out) as f:
                lines = [json.loads(line) for line in f]
            self.assertEqual(sorted(line["group"] for line in lines), [0, 0, 1, 1])
            train = rows("data", "train.jsonl")
            for line in lines:
                self.assertEqual(line["goal_index"], train[line["prompt_id"]]["goal_index"])
                self.assertEqual(line["actions"][0], "search[wool coat]")  # the tiny model buys its one product
                self.assertEqual((line["steps"], line["done"]), (3, True))
                self.assertEqual(line["won"], line["reward"] >= 0.5)
                self.assertEqual(line["prompt"], webshop.step_messages(line, 0))
                self.assertEqual(len(line["observations"]), len(line["actions"]) + 1)
            self.assertEqual(summary["mean_reward"], round(sum(line["reward"] for line in lines) / 4, 4))
            bad = subprocess.run(
                [sys.executable, "-m", "hflm.rollouts", "--task", "webshop", "--checkpoint", base, "--base", base,
                 "--data", os.path.join(HOME, "assets", "webshop", "eval", "public.jsonl").replace("public", "nowhere"),
                 "--n", "2", "--out", out], env={**os.environ, "PYTHONPATH": os.pathsep.join([TASKS, STANDINS])},
                capture_output=True, text=True, timeout=600)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("cannot read --data", bad.stderr)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
