"""Upstream's web_agent_site/engine/goal.py: goals (synthetic and human) and the purchase reward.

Goals as upstream makes them: a synthetic goal per product with an instruction and per combination of its options
("<instruction> with <option>: <value>, and ...", then ", and price lower than X dollars" from Python's global random),
a human goal per human instruction; weights as upstream's. The reward is upstream's formula: (attributes matched +
options matched + price under the bound) / (attributes + options + 1), times the type reward (query, category,
title nouns). spaCy's noun tagging of titles is approximated (here: the title's words of two or more letters that are
not function words); thefuzz's token_set_ratio is thefuzz 0.19's, WebShop's pin, on difflib's SequenceMatcher as
thefuzz 0.19 runs without python-Levenshtein (thefuzz 0.20 and later score on rapidfuzz's Indel ratio, which differs).
"""

import difflib
import itertools
import random
import re
from collections import defaultdict

from web_agent_site.engine.normalize import normalize_color

PRICE_RANGE = [10.0 * i for i in range(1, 100)]
# Words spaCy never tags as nouns, which the stand-in's title nouns leave out.
FUNCTION_WORDS = frozenset("a an and are as at be but by for from in into is it its of on or the to with without "
                           "your you our this that these those new set pack".split())


def get_goals(all_products, product_prices, human_goals=True):
    if human_goals:
        return get_human_goals(all_products, product_prices)
    return get_synthetic_goals(all_products, product_prices)


def price_bound(product_prices, asin):
    """(price_upper, its text): a bound drawn from the next four steps of ten dollars above the price, as upstream."""
    if product_prices is None:
        return 1000000, ''
    price = product_prices[asin]
    price_range = [p for p in PRICE_RANGE if p > price][:4]
    if len(price_range) >= 2:
        _, price_upper = sorted(random.sample(price_range, 2))
        return price_upper, f', and price lower than {price_upper:.2f} dollars'
    return 1000000, ''


def get_human_goals(all_products, product_prices):
    goals = []
    for item in all_products:
        asin = item['asin']
        if 'instructions' not in item:
            continue
        for product in item['instructions']:
            attributes = product['instruction_attributes']
            if len(attributes) == 0:
                continue
            price_upper, price_text = price_bound(product_prices, asin)
            goals.append({
                'asin': asin, 'category': item['category'], 'query': item['query'], 'name': item['name'],
                'product_category': item['product_category'],
                'instruction_text': product['instruction'].strip('.') + price_text,
                'attributes': attributes, 'price_upper': price_upper, 'goal_options': product['instruction_options'],
            })
    for goal in goals:
        goal['weight'] = 1
    return goals


def get_synthetic_goals(all_products, product_prices):
    goals = []
    cnt_atts = defaultdict(int)
    for product in all_products:
        if product.get('instruction_text') is None:
            continue
        asin = product['asin']
        attributes = product['instruction_attributes']
        assert len(attributes) > 0
        price_upper, price_text = price_bound(product_prices, asin)
        options = product['options']
        option_names = sorted(options)
        for combination in itertools.product(*(options[name] for name in option_names)):
            goal_options = dict(zip(option_names, combination))
            option_text = ', and '.join(f'{k}: {v}' for k, v in goal_options.items())
            option_text = ' with ' + option_text if option_text else ''
            goals.append({
                'asin': asin, 'category': product['category'], 'query': product['query'],
                'product_category': product['product_category'],
                'instruction_text': f"{product['instruction_text']}{option_text}{price_text}",
                'attributes': attributes, 'price_upper': price_upper, 'goal_options': goal_options,
                'name': product['Title'],
            })
            for att in attributes:
                cnt_atts[att] += 1
    for goal in goals:
        goal['weight'] = sum(1. / cnt_atts[att] for att in goal['attributes']) / len(goal['attributes'])
    return goals


def title_nouns(name):
    return [w for w in re.findall(r"[a-z]{2,}", name.lower()) if w not in FUNCTION_WORDS]


def get_type_reward(purchased_product, goal):
    """The type reward: 1, 0.5 when neither query, category (two parts shared) nor title nouns (over 0.2) match,
    0.1 below a title score of 0.1, 0 with no title noun shared."""
    query_match = purchased_product['query'] == goal['query']
    purchased_category = [x.strip() for x in purchased_product['product_category'].split('›')]
    goal_category = [x.strip() for x in goal['product_category'].split('›')]
    category_match = len(set(purchased_category) & set(goal_category)) >= 2
    purchased_type, desired_type = title_nouns(purchased_product['name']), title_nouns(goal['name'])
    n_intersect_type = len(set(purchased_type) & set(desired_type))
    title_score = 0.2 if len(desired_type) == 0 else n_intersect_type / len(desired_type)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return dict(r_type=r_type, query_match=query_match, category_match=category_match, title_score=title_score)


# thefuzz 0.19's full_process: Latin-1's upper half dropped, the rest of each non-word character a space.
LATIN1_UPPER_HALF = {c: None for c in range(128, 256)}
NON_WORD = re.compile(r"(?ui)\W")


def _process(text):
    return NON_WORD.sub(" ", str(text).translate(LATIN1_UPPER_HALF)).lower().strip()


def _ratio(a, b):
    """thefuzz 0.19's fuzz.ratio without python-Levenshtein (WebShop's install): difflib's, rounded."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(s1, s2):
    """thefuzz 0.19's fuzz.token_set_ratio: the best ratio among the shared tokens and each side's tokens, sorted."""
    p1, p2 = _process(s1), _process(s2)
    if not p1 or not p2:
        return 0
    tokens_a, tokens_b = set(p1.split()), set(p2.split())
    intersect = " ".join(sorted(tokens_a & tokens_b))
    combined_ab = (intersect + " " + " ".join(sorted(tokens_a - tokens_b))).strip()
    combined_ba = (intersect + " " + " ".join(sorted(tokens_b - tokens_a))).strip()
    return max(_ratio(intersect, combined_ab), _ratio(intersect, combined_ba), _ratio(combined_ab, combined_ba))


def get_attribute_reward(purchased_product, goal):
    """(share of the goal's attributes the product has, count): fuzzy among its attributes, else in its texts."""
    purchased_attrs = purchased_product['Attributes']
    goal_attrs = goal['attributes']
    num_attr_matches = 0
    for g_attr in goal_attrs:
        if any(token_set_ratio(p_attr, g_attr) > 85 for p_attr in purchased_attrs):
            num_attr_matches += 1
        elif (g_attr in purchased_product['Title'].lower()
              or g_attr in ' '.join(purchased_product['BulletPoints']).lower()
              or g_attr in purchased_product['Description'].lower()):
            num_attr_matches += 1
    return num_attr_matches / len(goal_attrs), num_attr_matches


def get_option_reward(purchased_options, goal_options):
    """(share of the goal's options the purchase has, count), colours normalised, fuzzy matched."""
    purchased_options = [normalize_color(o) for o in purchased_options]
    goal_options = [normalize_color(o) for o in goal_options]
    num_option_matches = 0
    for g_option in goal_options:
        if any(token_set_ratio(p_option, g_option) > 85 for p_option in purchased_options):
            num_option_matches += 1
    r_option = num_option_matches / len(goal_options) if len(goal_options) > 0 else None
    return r_option, num_option_matches


def get_reward(purchased_product, goal, price, options, **kwargs):
    """Upstream's total reward in [0, 1]; with verbose=True, (reward, its parts)."""
    r_type_dict = get_type_reward(purchased_product, goal)
    r_price = (price <= goal['price_upper']) if goal['price_upper'] > 0 else None
    r_att, num_attr_matches = get_attribute_reward(purchased_product, goal)
    goal_options = goal['goal_options'].items() if isinstance(goal['goal_options'], dict) else goal['goal_options']
    r_option, num_option_matches = get_option_reward(list(options.values()), goal_options)
    total = len(goal['attributes']) + len(goal['goal_options']) + 1
    total_reward = (num_attr_matches + num_option_matches + r_price) / total * r_type_dict['r_type']
    if kwargs.get('verbose', False):
        info = {'r_type': r_type_dict['r_type'], 'r_att': r_att, 'w_att': len(goal['attributes']) / total,
                'query_match': r_type_dict['query_match'], 'category_match': r_type_dict['category_match'],
                'title_score': r_type_dict['title_score']}
        if r_option is not None:
            info['r_option'], info['w_option'] = r_option, len(goal['goal_options']) / total
        if r_price is not None:
            info['r_price'], info['w_price'] = r_price, 1 / total
        return total_reward, info
    return total_reward
