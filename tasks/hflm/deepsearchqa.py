"""DeepSearchQA as the reference harness plays it: a ReAct loop of search[...] and answer[...], at most 6 steps.

    from hflm import deepsearchqa
    episodes = deepsearchqa.play(rows, policy, deepsearchqa.channel_search)   # rows: {"question", "answer_type", ...}
    deepsearchqa.string_match(episode["predicted"], gold, answer_type)          # the reference's fallback judge

The reference is RD-Agent autorl_bench's benchmarks/deepsearchqa/eval.py (`_react_loop`): the prompt is
REACT_SYSTEM_PROMPT, a blank line, "Question: {question}\\nAnswer type: {answer_type}\\n\\nThought:"; at each of at
most 6 steps the model completes it as plain text (no chat template), greedy, at most 256 new tokens, stopped at
"\\nAction:", "\\nThought:" or "\\nObservation:" (GENERATION); the text, stripped, is appended after a space. Its first
`Action: search[...]` or `Action: answer[...]` decides the step: an answer ends the episode (the template's own
"your final answer" is refused with "\\nThat is not a valid answer. Please think again.\\nThought:"); a search appends
"\\nObservation: {the top 3 snippets joined by ' | '}\\nThought:"; no action appends "\\nAction: answer[" and the
model's next text up to "]" (at most 128 tokens, FORCED) is the answer. Out of steps, the last answer[...] the
model wrote, else "I don't know". The stop at "\\nAction:" means an action is read only when the model writes it on
the line of its thought ("Thought: ... Action: search[...]"); on a new line it is cut, and the forced answer follows.

Where this differs from the reference, by design:
- lockstep play: every question of a set is one batch, one generate call per step over the episodes still running
  (the reference plays one question at a time); greedy decoding makes each episode the same either way, up to the
  last bits of batched arithmetic;
- search goes through the server's channel (a2rl_search: the server's provider, SerpAPI's or DuckDuckGo's or a local
  corpus, its cache and its records), never straight to the provider; in grading a failed search fails the grading
  (a provider's outage must not become a cached score), where the reference shows "Search error: ..." as the
  observation, as rollouts here do;
- the 4k context (the reference's vLLM max_model_len=4096): an episode whose prompt leaves fewer than 256 tokens of
  it ends there, as out of steps (vLLM would shorten its last generation instead);
- string_match never counts an empty prediction (the reference's `pred in gold` would).
"""

import concurrent.futures
import dataclasses
import re

from .alfworld import Policy as _TextPolicy
from .inference import GenerationParams

REACT_SYSTEM_PROMPT = """You are a research assistant that answers questions by searching the web.

You must follow this format strictly:
Thought: [your reasoning]
Action: search[your search query]   <- to search the web
  OR
Action: answer[Paris]   <- to give final answer

Rules:
- Always start with a Thought
- Use search[] to find information
- Use answer[] ONLY when you have enough information
- For Set Answer questions, list all items separated by commas
- Be concise and factual
"""
MAX_STEPS = 6
CONTEXT_TOKENS = 4096
GENERATION = GenerationParams(max_new_tokens=256, temperature=0.0, stop=("\nAction:", "\nThought:", "\nObservation:"),
                              chat_template=False)
FORCED = GenerationParams(max_new_tokens=128, temperature=0.0, stop=("]",), chat_template=False)
ACTION = re.compile(r"Action:\s*(search|answer)\[(.+?)\]", re.DOTALL)
PLACEHOLDER = "your final answer"
NO_ANSWER = "I don't know"
TOP_K = 3
# Searches of one step sent at once: the server answers at most 4 of a channel's at a time.
SEARCHES_AT_ONCE = 4


def prompt(question, answer_type="Single Answer"):
    """The reference's opening text for one question (upstream's `problem`)."""
    return f"{REACT_SYSTEM_PROMPT}\n\nQuestion: {question}\nAnswer type: {answer_type}\n\nThought:"


def string_match(predicted, gold, answer_type):
    """The reference's fallback judge: a single answer matches when either text holds the other (any case); a set
    answer when the prediction holds every comma-separated item of the gold. An empty prediction never matches."""
    pred, gold = predicted.strip().lower(), gold.strip().lower()
    if not pred:
        return False
    if answer_type == "Single Answer":
        return gold in pred or pred in gold
    return all(item.strip() in pred for item in gold.split(","))


def channel_search(query, strict=False):
    """The observation of one search through the server's channel: the top 3 snippets joined by " | ", or "No results
    found.". A refused or failed search is "Search error: ..." as the reference shows it; strict (grading) raises."""
    from a2rl_search import SearchError, observation

    try:
        return observation(query, TOP_K)
    except SearchError as e:
        if strict:
            raise
        return f"Search error: {e}"


class Policy(_TextPolicy):
    """A checkpoint as the ReAct agent's model (hflm.alfworld.Policy's engine: vLLM on a GPU, else transformers),
    with the call's own generation settings (a step's, or the forced answer's) and the prompt's length in tokens."""

    def __init__(self, model_dir, params=GENERATION, backend=None):
        super().__init__(model_dir, params, backend)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)

    def complete_with(self, prompts, params):
        saved, self.params = self.params, params
        try:
            return self.complete(prompts)
        finally:
            self.params = saved

    def tokens(self, text):
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def sampled(params, like):
    """params at the temperature, top-p and seed of `like` (a rollout's sampling), its own limits and stops kept."""
    return dataclasses.replace(params, temperature=like.temperature, top_p=like.top_p, seed=like.seed)


def play(rows, policy, search, params=GENERATION, max_steps=MAX_STEPS):
    """Plays one episode per row ({"question", "answer_type"}) in lockstep; search(query) -> observation text.

    Returns one episode per row, in order: {"prompt" (the opening text), "segments" ([text, by_model] appended to it,
    in order: the model's own texts and what the loop wrote), "completions" (the model's raw texts), "searches"
    (queries), "predicted", "steps", "ended" ("answer", "forced", "steps", "context")}.
    """
    forced_params = sampled(FORCED, params)
    episodes = [{"prompt": prompt(r["question"], r.get("answer_type") or "Single Answer"), "segments": [],
                 "completions": [], "searches": [], "predicted": None, "steps": 0, "ended": None} for r in rows]

    def text(e):
        return e["prompt"] + "".join(t for t, _ in e["segments"])

    running = list(range(len(rows)))
    with concurrent.futures.ThreadPoolExecutor(SEARCHES_AT_ONCE) as pool:
        for _ in range(max_steps):
            for i in list(running):
                if policy.tokens(text(episodes[i])) > CONTEXT_TOKENS - params.max_new_tokens:
                    episodes[i]["ended"] = "context"
                    running.remove(i)
            if not running:
                break
            outputs = policy.complete_with([text(episodes[i]) for i in running], params)
            forced, searching, still = [], [], []
            for i, raw in zip(running, outputs):
                e, generated = episodes[i], raw.strip()
                e["completions"].append(raw)
                e["steps"] += 1
                e["segments"].append([f" {generated}", True])
                match = ACTION.search(generated)
                if not match:
                    e["segments"].append(["\nAction: answer[", False])
                    forced.append(i)
                    continue
                kind, content = match.group(1), match.group(2).strip()
                if kind == "answer" and content.lower() == PLACEHOLDER:
                    e["segments"].append(["\nThat is not a valid answer. Please think again.\nThought:", False])
                    still.append(i)
                elif kind == "answer":
                    e["predicted"], e["ended"] = content, "answer"
                else:
                    e["searches"].append(content)
                    searching.append(i)
            if forced:
                for i, raw in zip(forced, policy.complete_with([text(episodes[i]) for i in forced], forced_params)):
                    e, answer = episodes[i], raw.strip()
                    e["completions"].append(raw)
                    if answer.lower() == PLACEHOLDER:  # the reference goes on from "Action: answer[", its answer unkept
                        still.append(i)
                        continue
                    e["segments"].append([answer, True])
                    e["predicted"], e["ended"] = answer, "forced"
            observations = pool.map(search, [episodes[i]["searches"][-1] for i in searching])
            for i, observation in zip(searching, observations):
                episodes[i]["segments"].append([f"\nObservation: {observation}\nThought:", False])
                still.append(i)
            running = sorted(still)
    for e in episodes:
        if e["predicted"] is None:
            written = "\n".join(t for t, by_model in e["segments"] if by_model)
            real = [c.strip() for kind, c in ACTION.findall(written) if kind == "answer" and c.strip().lower() != PLACEHOLDER]
            e["predicted"] = real[-1] if real else NO_ANSWER
            e["ended"] = e["ended"] or "steps"
    return episodes


def transcript(episode):
    """The whole text of an episode: the opening prompt and every segment, as the model last saw it."""
    return episode["prompt"] + "".join(t for t, _ in episode["segments"])


def sample_episodes(args, rows, indices, model_dir, backend):
    """hflm.rollouts for deepsearchqa: args.group_size episodes of each chosen train question, played as the grader
    plays them but sampled at args.temperature / args.top_p, searching through the run's channel (each query the
    run's, counted against its search budget). Writes one JSON line per episode, each chunk as soon as it is played:
    {"group", "prompt_id", "id", "question", "answer_type", "answer" (gold), "prompt", "segments", "completions",
    "searches", "predicted", "steps", "ended", "reward": 1.0 when string_match(predicted, answer) else 0.0}."""
    import json
    import sys
    import time

    params = dataclasses.replace(GENERATION, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                 top_p=args.top_p, seed=args.seed * 1_000_003 % 2**31)
    policy = Policy(model_dir, params, backend)
    per_call = len(indices) if backend == "vllm" else max(1, 32 // args.group_size)
    rewarded = 0.0
    start = time.time()
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            for first in range(0, len(indices), per_call):
                groups = range(first, min(first + per_call, len(indices)))
                chosen = [rows[indices[g]] for g in groups for _ in range(args.group_size)]
                for k, episode in enumerate(play(chosen, policy, channel_search, params)):
                    g, row = groups[k // args.group_size], chosen[k]
                    reward = float(string_match(episode["predicted"], row["answer"], row["answer_type"]))
                    rewarded += reward
                    line = {"group": g, "prompt_id": indices[g], "id": row.get("id"), "question": row["question"], "answer_type": row["answer_type"],
                            "answer": row["answer"], **episode, "reward": reward}
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
                out.flush()
                print(f"rollouts: {groups.stop}/{len(indices)} groups in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    finally:
        policy.close()
    print(json.dumps({"episodes": args.n, "mean_reward": round(rewarded / args.n, 4), "out": args.out}))
    return 0
