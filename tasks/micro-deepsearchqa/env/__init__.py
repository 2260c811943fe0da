"""micro_deepsearchqa: multi-hop question answering by searching a small local corpus (DeepSearchQA at micro scale).

    from micro_deepsearchqa import make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS
    env = make_env()
    obs, info = env.reset(game["seed"], options=game)    # game: a line of data/train.jsonl
    obs, reward, done, info = env.step("search[#2]")

The corpus (micro_deepsearchqa.corpus) holds one document per fictional entity: 600 people, 240
companies, 60 cities and 8 regions, e.g.

    Murufer: born in Funul; lives in Momis; works at Lezuros

A game is {"seed": int, "type": str, "subject": str}; its question asks for an entity two relations
away from the subject, e.g. "Where is the employer of Murufer based?" (Murufer works at Lezuros, which
is based in the answer). Six question types: hq, birth_region, founder, mayor (about a person),
founder_birth, company_region (about a company).

Observations (at most 200 characters) end with the question line "Q: ...", after
  - "R: " lines: search results, the top BM25 documents (as many of the top 3 as fit), or
  - one "D: " line: a document opened through a link, or
  - "Nothing happens." (an action that is not understood; the links stay), "No results.", "Answered ...".
Every entity mentioned after a relation phrase carries a link number [k], numbered through the observation.
The first observation shows the results of searching the question text, e.g.

    R: Murufer: born in [1] Funul; lives in [2] Momis; works at [3] Lezuros
    R: Pubo: run by [4] Neter; based in [5] Vuzel; founded by [6] Murufer
    Q: Where is the employer of Murufer based?

after search[#3]:

    D: Lezuros: run by [1] Letosan; based in [2] Raben; founded by [3] Bagen
    Q: Where is the employer of Murufer based?

and answer[#2] answers Raben, correctly.

Actions (one line; the model writes it after format_prompt(obs) = obs + "\\n> "):
  search[#k]     open the document of link k (it becomes the observation as a "D: " line)
  search[text]   BM25 search of the corpus; the top 3 documents become "R: " lines
  answer[#k]     answer with the entity of link k: ends the episode
  answer[text]   answer with text (normalised match: case and punctuation ignored): ends the episode
Anything else: "Nothing happens." (the step still counts). info["admissible"] lists search[#k] and
answer[#k] for the current links (text forms are always allowed too).

Reward 1.0 when the answer is correct, else 0.0; info["success"] once done. An episode ends at the
answer or after MAX_STEPS (6) steps.
Rollouts: python3 -m micro_deepsearchqa.rollouts --checkpoint DIR --data /workspace/data/train.jsonl --n 512 --out F
"""

from . import corpus
from .game import MAX_NEW_TOKENS, MAX_STEPS, QUESTION_TYPES, TYPES, DeepSearchEnv, answer_of, format_prompt, make_env

__all__ = ["corpus", "make_env", "format_prompt", "answer_of", "DeepSearchEnv", "MAX_STEPS", "MAX_NEW_TOKENS", "QUESTION_TYPES", "TYPES"]
