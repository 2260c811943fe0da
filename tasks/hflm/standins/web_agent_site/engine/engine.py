"""Upstream's web_agent_site/engine/engine.py: products, search, pages and actions, without Lucene, Flask or HTML.

load_products reads upstream's data files with upstream's rules (the first num_products products, asins deduplicated,
prices parsed from "$a" or "$a$b", options lower-cased with "/" as " | ", the instruction fields of the attribute
file). The search engine is the stand-in's own BM25 index over upstream's index documents
(search_engine/resources*/documents.jsonl, which upstream's convert_product_file_format.py writes and pyserini
indexes), scored as pyserini's LuceneSearcher scores them (web_agent_site.engine.lucene: Lucene's English analyser,
BM25 k1 0.9, b 0.4). map_action_to_html returns a Page (the texts and clickables the template would show) instead of
HTML.
"""

import json
import os
import random
import re
from collections import defaultdict
from decimal import Decimal

from web_agent_site.engine.lucene import LuceneBM25
from web_agent_site.utils import BASE_DIR, DEFAULT_ATTR_PATH, DEFAULT_FILE_PATH, HUMAN_ATTR_PATH  # noqa: F401

SEARCH_RETURN_N = 50
PRODUCT_WINDOW = 10
TOP_K_ATTR = 10

END_BUTTON = 'Buy Now'
NEXT_PAGE = 'Next >'
PREV_PAGE = '< Prev'
BACK_TO_SEARCH = 'Back to Search'

ACTION_TO_TEMPLATE = {
    'Description': 'description_page.html',
    'Features': 'features_page.html',
    'Reviews': 'review_page.html',
    'Attributes': 'attributes_page.html',
}


class Page:
    """What one of upstream's templates shows: its visible texts in document order and its clickables.

    clickables: (text as upstream's text_to_clickable keys it, the element: {"kind": "button" | "product-link" |
    "option", "name": the option's name for an option}), buttons and product links first, then options, as upstream
    collects them. has_search_bar: the search page's input."""

    def __init__(self, texts, clickables=(), has_search_bar=False):
        self.texts = [t for t in texts if t]
        self.clickables = list(clickables)
        self.has_search_bar = has_search_bar


def button(text):
    return (text.lower(), {"kind": "button"})


def map_action_to_html(action, **kwargs):
    """The page upstream's template renders for an action (start, search, click[...]), as a Page."""
    action_name, action_arg = parse_action(action)
    instruction = ["Instruction:", kwargs.get('instruction_text')]
    if action_name == 'start':
        return Page(["WebShop", *instruction, "Search"], [button("Search")], has_search_bar=True)
    if action_name == 'search':
        page = kwargs['page']
        texts, clicks = [*instruction, BACK_TO_SEARCH], [button(BACK_TO_SEARCH)]
        texts.append(f"Page {page} (Total results: {kwargs['total']})")
        if page > 1:
            texts.append(PREV_PAGE)
            clicks.append(button(PREV_PAGE))
        texts.append(NEXT_PAGE)
        clicks.append(button(NEXT_PAGE))
        for item in kwargs['products']:
            texts += [item['asin'], item['Title'], item['Price']]
            clicks.append((item['asin'].lower(), {"kind": "product-link"}))
        return Page(texts, clicks)
    if action_name == 'click' and action_arg == END_BUTTON:
        # done_page.html's texts: its display:none block is text too (upstream's tag_visible reads tags, not CSS), and
        # the env passes none of goal, mturk_code, purchased_attrs, category, query, product_category, reward_info.
        return Page(["Thank you for shopping with us!", "Your code:", "None", "(Paste it in your MTurk interface.)",
                     "Purchased", "asin", kwargs['asin'], "options", tojson(kwargs['options']), "attrs", "None",
                     "category", "None", "query", "None", "product category", "None", "Target", "asin", "options",
                     "attrs", "price upper", "instuction text", "category", "product category", "query", "Goal",
                     "None", "Reward", "Your score (min 0.0, max 1.0)", str(kwargs['reward']), "Reward Details",
                     "None"])
    sub_page = [*instruction, BACK_TO_SEARCH, PREV_PAGE]
    sub_clicks = [button(BACK_TO_SEARCH), button(PREV_PAGE)]
    info = kwargs.get('product_info')
    if action_name == 'click' and action_arg == 'Description':
        return Page([*sub_page, info['Description']], sub_clicks)
    if action_name == 'click' and action_arg == 'Features':
        return Page([*sub_page, *(b.strip() for b in info['BulletPoints'])], sub_clicks)
    if action_name == 'click' and action_arg == 'Reviews':
        texts = list(sub_page)
        for review in info['Reviews']:
            texts += [f'"{review["title"]}"', str(review["score"]), review["body"]]
        return Page(texts, sub_clicks)
    if action_name == 'click' and action_arg == 'Attributes':
        return Page([*sub_page, *info['Attributes']], sub_clicks)
    if action_name == 'click':
        texts, options = list(sub_page), []
        for option_name, option_contents in info['options'].items():
            texts.append(option_name)
            for option_content in option_contents:
                texts.append(option_content)
                options.append((option_content, {"kind": "option", "name": option_name}))
        texts += [info['Title'], f"Price: {info['Price']}", f"Rating: {info['Rating']}", "Description", "Features", "Reviews"]
        clicks = sub_clicks + [button("Description"), button("Features"), button("Reviews")]
        if kwargs.get('show_attrs'):
            texts.append("Attributes")
            clicks.append(button("Attributes"))
        texts.append(END_BUTTON)
        clicks.append(button(END_BUTTON))
        return Page(texts, clicks + options)
    raise ValueError('Action name not recognized.')


def tojson(value):
    """Flask's tojson filter: sorted keys, ASCII, and <, >, &, ' escaped for HTML."""
    text = json.dumps(value, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("'", "\\u0027")


def parse_action(action):
    """Parse action string to action name and its arguments (upstream's "(.+)\\[(.+)\\]" rule)."""
    m = re.match(re.compile(r'(.+)\[(.+)\]'), action)
    if m is None:
        return action, None
    return m.groups()


def get_top_n_product_from_keywords(keywords, search_engine, all_products, product_item_dict, attribute_to_asins=None):
    if keywords[0] == '<r>':
        return random.sample(all_products, k=SEARCH_RETURN_N)
    if keywords[0] == '<a>':
        asins = attribute_to_asins[' '.join(keywords[1:]).strip()]
        return [p for p in all_products if p['asin'] in asins]
    if keywords[0] == '<c>':
        return [p for p in all_products if p['category'] == keywords[1].strip()]
    if keywords[0] == '<q>':
        query = ' '.join(keywords[1:]).strip()
        return [p for p in all_products if p['query'] == query]
    hits = search_engine.search(' '.join(keywords), k=SEARCH_RETURN_N)
    return [product_item_dict[asin] for asin in hits if asin in product_item_dict]


def get_product_per_page(top_n_products, page):
    return top_n_products[(page - 1) * PRODUCT_WINDOW:page * PRODUCT_WINDOW]


def generate_product_prices(all_products):
    """A price per product: its one price, or uniform between its two (Python's global random, as upstream)."""
    product_prices = {}
    for product in all_products:
        pricing = product['pricing']
        if not pricing:
            price = 100.0
        elif len(pricing) == 1:
            price = pricing[0]
        else:
            price = random.uniform(*pricing[:2])
        product_prices[product['asin']] = price
    return product_prices


def init_search_engine(num_products=None):
    """The index upstream opens for num_products (indexes_100, _1k, _100k, or the whole), here its source documents."""
    resources = {100: 'resources_100', 1000: 'resources_1k', 100000: 'resources_100k', None: 'resources'}
    if num_products not in resources:
        raise NotImplementedError(f'num_products being {num_products} is not supported yet.')
    return LuceneBM25(os.path.join(BASE_DIR, '..', 'search_engine', resources[num_products], 'documents.jsonl'))


def clean_product_keys(products):
    for product in products:
        for key in ('product_information', 'brand', 'brand_url', 'list_price', 'availability_quantity',
                    'availability_status', 'total_reviews', 'total_answered_questions', 'seller_id', 'seller_name',
                    'fulfilled_by_amazon', 'fast_track_message', 'aplus_present', 'small_description_old'):
            product.pop(key, None)
    return products


def load_products(filepath, num_products=None, human_goals=True):
    """(all_products, product_item_dict, product_prices, attribute_to_asins) from upstream's product file and the
    attribute files at DEFAULT_ATTR_PATH and HUMAN_ATTR_PATH (this module's names, as upstream reads them)."""
    with open(filepath, encoding="utf-8") as f:
        products = clean_product_keys(json.load(f))
    with open(DEFAULT_ATTR_PATH, encoding="utf-8") as f:
        attributes = json.load(f)
    with open(HUMAN_ATTR_PATH, encoding="utf-8") as f:
        human_attributes = json.load(f)
    if num_products is not None:
        products = products[:num_products]  # upstream: the product file is already shuffled
    asins, all_products = set(), []
    for p in products:
        asin = p['asin']
        if asin == 'nan' or len(asin) > 10 or asin in asins:
            continue
        asins.add(asin)
        p['Title'] = p['name']
        p['Description'] = p['full_description']
        p['Reviews'] = []
        p['Rating'] = 'N.A.'
        p['BulletPoints'] = p['small_description'] if isinstance(p['small_description'], list) else [p['small_description']]
        pricing = p.get('pricing')
        if not pricing:
            pricing, price_tag = [100.0], '$100.0'
        else:
            pricing = [float(Decimal(re.sub(r'[^\d.]', '', price))) for price in pricing.split('$')[1:]]
            if len(pricing) == 1:
                price_tag = f"${pricing[0]}"
            else:
                price_tag = f"${pricing[0]} to ${pricing[1]}"
                pricing = pricing[:2]
        p['pricing'], p['Price'] = pricing, price_tag
        options, option_to_image = {}, {}
        for option_name, option_contents in (p['customization_options'] or {}).items():
            if option_contents is None:
                continue
            values = []
            for option_content in option_contents:
                value = option_content['value'].strip().replace('/', ' | ').lower()
                values.append(value)
                option_to_image[value] = option_content.get('image', None)
            options[option_name.lower()] = values
        p['options'], p['option_to_image'] = options, option_to_image
        p['Attributes'] = attributes[asin]['attributes'] if asin in attributes and 'attributes' in attributes[asin] else ['DUMMY_ATTR']
        if human_goals:
            if asin in human_attributes:
                p['instructions'] = human_attributes[asin]
        else:
            p['instruction_text'] = attributes.get(asin, {}).get('instruction', None)
            p['instruction_attributes'] = attributes.get(asin, {}).get('instruction_attributes', None)
        p['MainImage'] = p['images'][0] if p.get('images') else None
        p['query'] = p['query'].lower().strip()
        all_products.append(p)
    attribute_to_asins = defaultdict(set)
    for p in all_products:
        for a in p['Attributes']:
            attribute_to_asins[a].add(p['asin'])
    product_item_dict = {p['asin']: p for p in all_products}
    return all_products, product_item_dict, generate_product_prices(all_products), attribute_to_asins
