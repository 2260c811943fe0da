"""Upstream's web_agent_site/utils.py: the data paths (relative to the repo, as upstream's) and random_idx."""

import bisect
import random
from os.path import abspath, dirname, join

BASE_DIR = dirname(abspath(__file__))

DEFAULT_ATTR_PATH = join(BASE_DIR, "../data/items_ins_v2_1000.json")
DEFAULT_FILE_PATH = join(BASE_DIR, "../data/items_shuffle_1000.json")
HUMAN_ATTR_PATH = join(BASE_DIR, "../data/items_human_ins.json")


def random_idx(cum_weights):
    """A random index, weighted by the goals' weights (upstream's)."""
    pos = random.uniform(0, cum_weights[-1])
    idx = bisect.bisect(cum_weights, pos)
    return min(idx, len(cum_weights) - 2)
