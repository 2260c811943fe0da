"""micro_deepsearchqa: multi-hop question answering by searching a small local corpus (DeepSearchQA at micro scale).

    from micro_deepsearchqa import make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS, expert
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)    # game: a line of data/train.jsonl
    obs, reward, done, info = env.step("search[#2]")

The corpus (micro_deepsearchqa.corpus) holds one document per fictional entity: 600 people, 240
companies, 60 cities and 8 regions, e.g.

    Govun: works at [1] Delosi; lives in [2] Tusezan; born in [3] Podor

A game is {"seed": int, "type": str, "subject": str}; its question asks for an entity two relations
away from the subject, e.g. "Where is the employer of Govun based?" (Govun works at Delosi, which is
based in the answer). Six question types: hq, birth_region, founder, mayor (about a person),
founder_birth, company_region (about a company).

Observations (at most 200 characters) start with the question line "Q: ...", followed by
  - "R: " lines: search results, the top BM25 documents (as many of the top 3 as fit), or
  - one "D: " line: a document opened through a link,
  - "Nothing happens." after an action that is not understood, or "No results.".
Every entity mentioned after a relation phrase carries a link number [k], numbered through the observation.
The first observation shows the results of searching the question text.

Actions (one line; the model writes it after format_prompt(obs) = obs + "\\n> "):
  search[#k]     open the document of link k (it becomes the observation as a "D: " line)
  search[text]   BM25 search of the corpus; the top 3 documents become "R: " lines
  answer[#k]     answer with the entity of link k: ends the episode
  answer[text]   answer with text (normalised match: case and punctuation ignored): ends the episode
Anything else: "Nothing happens." (the step still counts). info["admissible"] lists search[#k] and
answer[#k] for the current links (text forms are always allowed too).

Reward 1.0 when the answer is correct, else 0.0; info["success"] once done. An episode ends at the
answer or after MAX_STEPS (6) steps. The expert (expert(obs)) solves every game in two steps.
Rollouts: python3 -m micro_deepsearchqa.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 512 --out F
"""

from . import corpus
from .game import MAX_NEW_TOKENS, MAX_STEPS, QUESTION_TYPES, TYPES, DeepSearchEnv, answer_of, expert, format_prompt, make_env

__all__ = ["corpus", "make_env", "format_prompt", "expert", "answer_of", "DeepSearchEnv", "MAX_STEPS", "MAX_NEW_TOKENS", "QUESTION_TYPES", "TYPES"]
