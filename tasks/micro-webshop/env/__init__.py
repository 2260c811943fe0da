"""micro_webshop: a micro WebShop, a text shop where the policy searches, opens a product, picks a size and buys.

    from micro_webshop import make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)     # game: a line of data/train.jsonl
    obs, reward, done, info = env.step("search[red cotton shirt]")

A game is {"seed": int, "colour": ..., "material": ..., "type": ...}: the instruction asks for that product; its
size and budget, and the shop's catalogue of 8 products with prices and sizes, follow from the seed.

Every observation starts with the instruction, then " | " and the page (at most ~160 characters):
    search page   "red cotton shirt, size m, under $30 | search"
    results       "red cotton shirt, size m, under $30 | [1] red wool shirt $52 [2] red cotton dress $41 [3] red cotton shirt $24"
                  the 4 catalogue products sharing most words with the query, sorted by price, highest first
    product page  "red cotton shirt, size m, under $30 | red cotton shirt $24 sizes: s m l"   (after a size: "... chosen: m")
Actions (one line; anything else, or an action that does not apply to the page, gives "nothing happens. " + the page):
    search[<words>]   on the search page: search the catalogue
    click[<n>]        on the results page: open result n (1-4)
    click[<size>]     on a product page: choose a size (s, m, l, xl, among those listed)
    click[buy]        on a product page once a size is chosen: buy it; the episode ends
    click[back]       results -> search page, product page -> results
info["admissible"] lists the valid actions of the current page; on the search page it holds the one right
query, search[<colour> <material> <type>] (any other non-empty query is valid too).

Reward (micro analogue of WebShop's): 0 until the purchase; then 0 for a wrong product type, else the share of
{colour, material, price under budget} that match, times 0.45 for a wrong size. info["success"] (when done) is
reward >= 0.5, which needs the wanted product in the wanted size. An episode ends at the purchase or after
MAX_STEPS (8) actions. info["task_type"] is the product type asked for.

The policy sees format_prompt(observation) = observation + "\\n> " and writes the action, then EOS (at most
MAX_NEW_TOKENS characters). Play episodes with
    python3 -m micro_webshop.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 256 --group-size 8 --out FILE
"""

from .prompt import MAX_NEW_TOKENS, format_prompt
from .shop import (
    COLOURS, MATERIALS, MAX_STEPS, SIZES, TYPES, WebShopEnv, make_env, make_game, parse, purchase_reward, search,
)

__all__ = [
    "COLOURS", "MATERIALS", "MAX_NEW_TOKENS", "MAX_STEPS", "SIZES", "TYPES", "WebShopEnv", "format_prompt", "make_env",
    "make_game", "parse", "purchase_reward", "search",
]
