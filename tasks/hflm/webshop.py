"""WebShop as the reference harness plays it: ReAct prompt, the step loop, greedy chat completion, success rate.

    from hflm import webshop
    variant = webshop.VARIANTS["webshop"]
    server = webshop.open_server(root, variant)               # upstream's WebAgentTextEnv over a WebShop root
    episodes = webshop.play(server, goal_indices, webshop.Policy(model_dir).complete, variant)
    score, won, total = webshop.success_rate(episodes)

The reference is RD-Agent autorl_bench's benchmarks/webshop/eval.py: `WebAgentTextEnv(observation_mode="text",
num_products=1000)` (synthetic goals), goals 0-99 (`env.reset(session=i)`), at most 50 steps of: the prompt
(`react_prompt`: the instruction as `get_instruction_text()` gives it, the available actions as `search[<your query>]`
and `click[...]` lines, the rules, the last five (action, observation) pairs of the history, the current observation),
sent as a chat with the reference's system message (SYSTEM), greedy, at most 100 new tokens, cut at the first
newline; the action is that text stripped, an "Action:" prefix dropped and "choose[" read as "click[" (`clean_action`).
An episode ends when the env says done (Buy Now) with the env's reward; success is reward >= 0.5; an episode that
is not done after 50 steps has reward 0. The score is the percentage of successes.

Variants (VARIANTS): "webshop" is the reference's; "webshop-human" is WebShop's own papers' evaluation: the whole
product set, human goals 0-499 (the papers' test split), success = reward 1, and the score the papers' headline: the
mean reward x 100, the success rate beside it (`headline`).

Where this differs from the reference, by design: all episodes of a half are played in lockstep, one batched generate
call per step over the episodes still running, each episode its own env session on one shared server (the reference
plays one goal at a time); greedy decoding makes each episode the same either way, up to the last bits of batched
arithmetic. Python's global random is seeded (GOAL_SEED) before the server is built: upstream draws the products'
prices and the goals' price bounds from it unseeded, so the goals' texts would change from one run to the next.
The env is `web_agent_site` as the server chose it (A2RL_ENV_PACKAGES, src/tasks/full-task.ts): the stand-in
(tasks/hflm/standins/web_agent_site), which the server puts on the path ahead of site-packages, or, asked for, the
upstream package the runtime holds, which searches pyserini's Lucene index under search_engine/indexes*; which one
played is in result.json (`environment`) and in the grader version.
"""

import dataclasses
import os

from .alfworld import Policy  # noqa: F401 (the same checkpoint-as-policy: vLLM engine or transformers, per step)
from .inference import GenerationParams

SYSTEM = ("You are a helpful shopping assistant browsing an e-commerce website. "
          "Given a user instruction, current observation, and available actions, "
          "pick the best action to find and purchase a matching product. "
          "Output ONLY one action (e.g., 'search[red shoes]', 'click[buy now]') "
          "with NO extra text, NO explanation.")
MAX_STEPS = 50
HISTORY_WINDOW = 5
GENERATION = GenerationParams(max_new_tokens=100, temperature=0.0, stop=("\n",), chat_template=True)
GOAL_SEED = 0
ATTRIBUTES_HUMAN = "items_human_ins.json"
STANDIN_VERSION = "0.0.0+standin"  # tasks/hflm/standins/web_agent_site's __version__


@dataclasses.dataclass(frozen=True)
class Variant:
    task: str
    products: str  # the product file under <root>/data/, upstream's name
    attributes: str  # the synthetic instructions and attributes file under <root>/data/
    num_products: object  # WebAgentTextEnv's num_products: 1000, or None for the whole set
    human_goals: bool
    eval_goals: int  # the evaluation: goals [0, eval_goals) of the env's shuffled list
    success: float  # an episode succeeds at reward >= success
    headline: str  # the score: "success_rate" (the reference's) or "mean_reward" (x 100, WebShop's papers'); both are kept


VARIANTS = {
    "webshop": Variant("webshop", "items_shuffle_1000.json", "items_ins_v2_1000.json", 1000, False, 100, 0.5, "success_rate"),
    "webshop-human": Variant("webshop-human", "items_shuffle.json", "items_ins_v2.json", None, True, 500, 1.0, "mean_reward"),
}
# Upstream's index folder per num_products (engine.init_search_engine) and the documents it indexes.
INDEX_RESOURCES = {1000: "resources_1k", None: "resources"}
# Upstream's Lucene index per num_products (pyserini's, built by search_engine/run_indexing.sh from INDEX_RESOURCES).
LUCENE_INDEXES = {1000: "indexes_1k", None: "indexes"}


def configure(root, variant):
    """Points upstream's data paths at a WebShop root (<root>/data/<files>, <root>/search_engine/): upstream reads its
    attribute files from module constants and its index from the package's parent folder, not from arguments."""
    from web_agent_site.engine import engine

    engine.DEFAULT_ATTR_PATH = os.path.join(root, "data", variant.attributes)
    engine.HUMAN_ATTR_PATH = os.path.join(root, "data", ATTRIBUTES_HUMAN)
    # init_search_engine opens BASE_DIR/../search_engine/<index>: any existing folder of the root stands for the package's.
    engine.BASE_DIR = os.path.join(root, "data")


def environment():
    """The web_agent_site package this process plays on, for the grade's result.json: "web_agent_site=stand-in", or
    "web_agent_site=upstream:<version> <folder>" for upstream's (the grader version's own record, with the dist-info's
    name and version, is src/grading/environment.ts's)."""
    import web_agent_site

    version = getattr(web_agent_site, "__version__", None)
    if version == STANDIN_VERSION:
        return "web_agent_site=stand-in"
    return f"web_agent_site=upstream:{version or 'unknown'} {os.path.dirname(os.path.abspath(web_agent_site.__file__))}"


def open_server(root, variant):
    """Upstream's WebAgentTextEnv over the WebShop root, built with a seeded global random; its .server (products,
    search engine, goals) is shared by the episodes' envs (sessions)."""
    import random

    from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv

    for name in (variant.products, variant.attributes, ATTRIBUTES_HUMAN):
        if not os.path.isfile(os.path.join(root, "data", name)):
            raise ValueError(f"{os.path.join(root, 'data', name)} is missing: prepare the task's assets again")
    index = os.path.join(root, "search_engine", LUCENE_INDEXES[variant.num_products])
    if environment() != "web_agent_site=stand-in" and not os.path.isdir(index):
        raise ValueError(f"{index} is missing: upstream's web_agent_site searches pyserini's Lucene index; prepare the "
                         "task's assets on a host where pyserini imports (it builds the index), or play on the stand-in")
    configure(root, variant)
    state = random.getstate()
    random.seed(GOAL_SEED)
    try:
        return WebAgentTextEnv(observation_mode="text", file_path=os.path.join(root, "data", variant.products),
                               num_products=variant.num_products, human_goals=variant.human_goals)
    finally:
        random.setstate(state)


def sessions(env, n):
    """n text envs on env's server, each its own session prefix, so that episodes of one goal do not share a session."""
    from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv

    return [WebAgentTextEnv(observation_mode="text", server=env.server, session_prefix=f"e{k}-") for k in range(n)]


def format_available_actions(available):
    """The reference's list of actions: "search[<your query>]" on a page with a search bar, then click[...] per clickable."""
    lines = (["search[<your query>]"] if available.get("has_search_bar") else []) + [f"click[{t}]" for t in available.get("clickables", [])]
    return "\n".join(f"  {a}" for a in lines)


def react_prompt(instruction, history, observation, available_actions="", history_window=HISTORY_WINDOW):
    """The reference's user message: the task, the available actions, the rules, the last history_window (action,
    observation after it) pairs as "Observation k" / "Action k", then the current observation and "Action n:"."""
    prompt = f"""You are shopping on an e-commerce website. Find and purchase a product matching the user's instruction.

Instruction: {instruction}

Available actions:
{available_actions}

Rules:
- Output ONLY one action from the available actions list above.
- For search, use: search[your query]
- For clicking, use: click[exact text from the list]
- Do NOT output anything other than the action.

Now it's your turn:
"""
    recent = history[-history_window:]
    offset = len(history) - len(recent)
    for i, (action, obs) in enumerate(recent):
        prompt += f"\nObservation {offset + i + 1}: {obs}\n"
        prompt += f"Action {offset + i + 1}: {action}\n"
    prompt += f"\nObservation {len(history) + 1}: {observation}\n"
    prompt += f"Action {len(history) + 1}:"
    return prompt


def messages(prompt):
    """The chat the reference sends: its system message, then the prompt as the user's."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def clean_action(text):
    """The reference's reading of a completion: stripped, an "Action:" prefix dropped, "choose[" read as "click[" ."""
    action = text.strip()
    if action.startswith("Action:"):
        action = action[7:].strip()
    if action.startswith("choose["):
        action = "click[" + action[7:]
    return action


def step_messages(episode, t):
    """The chat the model answered at step t of a played episode (0-based): its history is the steps before t."""
    history = list(zip(episode["actions"][:t], episode["observations"][1 : t + 1]))
    prompt = react_prompt(episode["instruction"], history, episode["observations"][t], episode["available_actions"][t])
    return messages(prompt)


def play(env, goal_indices, complete, variant, max_steps=MAX_STEPS):
    """Plays one episode per goal index (of env's server's goals) in lockstep; complete(chats) -> texts.

    Returns one episode per goal, in order: {"goal_index", "instruction" (as get_instruction_text gives it),
    "observations" (the opening page, then the page after each action), "available_actions" (the prompt's list at
    each step), "completions" (raw), "actions", "reward" (the env's at Buy Now, else 0), "done", "won" (reward >=
    variant.success), "steps"}.
    """
    if not goal_indices:
        return []
    n_goals = len(env.server.goals)
    bad = [i for i in goal_indices if not 0 <= i < n_goals]
    if bad:
        raise ValueError(f"goal {bad[0]} is not one of the env's {n_goals} goals: prepare the task's assets again")
    envs = sessions(env, len(goal_indices))
    episodes = []
    for session, goal in zip(envs, goal_indices):
        observation, _ = session.reset(session=goal)
        episodes.append({"goal_index": goal, "instruction": session.get_instruction_text(), "observations": [observation],
                         "available_actions": [], "completions": [], "actions": [], "reward": 0.0, "done": False,
                         "won": False, "steps": 0})
    running = list(range(len(episodes)))
    for _ in range(max_steps):
        if not running:
            break
        for i in running:
            episodes[i]["available_actions"].append(format_available_actions(envs[i].get_available_actions()))
        texts = complete([step_messages(episodes[i], episodes[i]["steps"]) for i in running])
        still = []
        for i, text in zip(running, texts):
            episode = episodes[i]
            action = clean_action(text)
            observation, reward, done, _info = envs[i].step(action)
            episode["completions"].append(text)
            episode["actions"].append(action)
            episode["observations"].append(observation)
            episode["steps"] += 1
            if done:
                episode.update(reward=float(reward), done=True, won=reward >= variant.success)
            else:
                still.append(i)
        running = still
    return episodes


def success_rate(episodes):
    """(percentage of successes, successes, episodes), as the reference counts them."""
    won = sum(e["won"] for e in episodes)
    return (round(100.0 * won / len(episodes), 2) if episodes else 0.0), won, len(episodes)


def mean_reward(episodes):
    """The reference's average reward (0 for an episode that never bought)."""
    return round(sum(e["reward"] for e in episodes) / len(episodes), 4) if episodes else 0.0


def headline(episodes, variant):
    """The variant's score of these episodes, in percent: the success rate, or the mean reward x 100."""
    if variant.headline == "mean_reward":
        return round(100.0 * sum(e["reward"] for e in episodes) / len(episodes), 2) if episodes else 0.0
    return success_rate(episodes)[0]


def sample_episodes(args, rows, indices, model_dir, backend):
    """hflm.rollouts for webshop and webshop-human: args.group_size episodes of each chosen train goal (rows[i]
    ["goal_index"], a goal of the env over --data's folder's WebShop root, data/webshop), played as the grader plays
    but sampled at args.temperature / args.top_p. Writes one JSON line per episode, each chunk as soon as it is played:
    {"group", "prompt_id", "goal_index", "instruction", "prompt" (the first step's chat), "completions", "actions",
    "observations", "available_actions", "reward" (the env's), "won", "done", "steps"}."""
    import json
    import sys
    import time

    variant = VARIANTS[args.task]
    root = os.path.join(os.path.dirname(os.path.abspath(args.data)), "webshop")
    env = open_server(root, variant)
    params = dataclasses.replace(GENERATION, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                 top_p=args.top_p, seed=args.seed * 1_000_003 % 2**31)
    policy = Policy(model_dir, params, backend)
    # A vLLM engine plays every episode at once; on CPU a few goals at a time, each chunk written when done.
    per_call = len(indices) if backend == "vllm" else max(1, 32 // args.group_size)
    total = 0.0
    start = time.time()
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            for first in range(0, len(indices), per_call):
                groups = range(first, min(first + per_call, len(indices)))
                goals = [rows[indices[g]]["goal_index"] for g in groups for _ in range(args.group_size)]
                episodes = play(env, goals, policy.complete, variant)
                for k, episode in enumerate(episodes):
                    g = groups[k // args.group_size]
                    total += episode["reward"]
                    line = {"group": g, "prompt_id": indices[g], "prompt": step_messages(episode, 0), **episode}
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
                out.flush()
                print(f"rollouts: {groups.stop}/{len(indices)} groups in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    finally:
        policy.close()
    print(json.dumps({"episodes": args.n, "mean_reward": round(total / args.n, 4), "out": args.out}))
    return 0


def grade(args, variant, grader_version):
    """A grader's whole work (tasks/webshop/grader/grade.py, tasks/webshop-human/grader/grade.py): the submission
    materialised, each half's goals played in upstream's env over EVAL_DIR/webshop, result.json written; exit status."""
    import json
    import sys

    import torch

    from . import gpu, grading

    model_dir = grading.open_submission(args, "grading")
    if model_dir is None:
        return 2
    env = open_server(os.path.join(args.eval_dir, "webshop"), variant)
    halves = {}
    for split in grading.SPLITS:
        halves[split] = grading.read_split(args.eval_dir, split)
        for row in halves[split]:
            goal = env.server.goals[row["goal_index"]] if row["goal_index"] < len(env.server.goals) else None
            if goal is None or goal["instruction_text"] != row["instruction_text"]:
                raise ValueError(f"{split}.jsonl: goal {row['goal_index']} is not the env's "
                                 f"({row['instruction_text'][:60]!r}): prepare the assets again")
    result, everything = {"grader_version": grader_version, "variant": variant.task, "success_at": variant.success}, []
    try:
        policy = Policy(model_dir, GENERATION)
    except gpu.GpuUnavailable as e:  # given GPUs it cannot use: said, never played on CPU instead
        grading.gpu_failure(f"GPU unavailable: {e}")
    try:
        for split, rows in halves.items():
            episodes = play(env, [r["goal_index"] for r in rows], policy.complete, variant)
            score, won, total = success_rate(episodes)
            result[split] = {"score": headline(episodes, variant), "success_rate": score, "correct": won, "total": total,
                             "mean_reward": mean_reward(episodes), "bought": sum(e["done"] for e in episodes)}
            everything += episodes
            print(f"{split}: {won}/{total} successes, mean reward {mean_reward(episodes)}", file=sys.stderr, flush=True)
    except torch.OutOfMemoryError as e:  # said as the other graders say it (hflm.grading.per_split), exit status 3
        grading.gpu_failure(f"out of GPU memory while playing ({e}); grade on a GPU with more memory (serve --gpus), "
                            "or free the GPU of other processes")
    finally:
        policy.close()
    score, won, total = success_rate(everything)
    result["private"].update(whole_score=headline(everything, variant), whole_success_rate=score, whole_correct=won,
                             whole_total=total, whole_mean_reward=mean_reward(everything),
                             environment=environment())
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0
