"""A stand-in for princeton-nlp/WebShop's `web_agent_site` package, for hosts where it cannot be installed.

    from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv
    env = WebAgentTextEnv(observation_mode="text", num_products=1000, file_path=PRODUCTS)
    obs, _ = env.reset(session=3)                       # goal 3 of the env's seeded shuffle
    env.get_instruction_text(); env.get_available_actions()   # {"has_search_bar", "clickables"}
    obs, reward, done, info = env.step("search[red cotton shirt]")   # then click[<asin>], click[<option>], click[buy now]

Upstream needs Java 11 and a pyserini Lucene index, spaCy and thefuzz; none is installable on this project's
machines. Only the surface the full tier's webshop task uses is here, with upstream's module names (utils,
engine.engine, engine.goal, engine.normalize, envs.web_agent_text_env), signatures, data files
(items_shuffle_1000.json, items_ins_v2_1000.json, items_human_ins.json, read by upstream's load_products), goal
generation (synthetic and human goals, the seed-233 shuffle), pages, action syntax and reward formula. Pages are not
rendered as HTML (no Flask, no BeautifulSoup): each page is the list of texts and clickables upstream's templates show,
joined with " [SEP] " as upstream's "text" observation mode joins them (the 60 recorded episodes' 393 observations are
upstream's own, tasks/hflm-tests/upstream/webshop_pages.json). Search is pure Python over upstream's index
documents (search_engine/resources_1k/documents.jsonl, what pyserini indexes), scored as pyserini's Lucene index
scores them (engine/lucene.py; equal to Lucene 8.8.1's terms, ranking and scores, tasks/hflm-tests/upstream). What differs from
upstream is listed in tasks/webshop/README.md.
"""

__version__ = "0.0.0+standin"
