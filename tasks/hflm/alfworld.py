"""ALFWorld as the reference harness plays it: ReAct prompts, the step loop, greedy text completion, success rate.

    from hflm import alfworld
    env, n = alfworld.open_games(data_root, "eval_out_of_distribution")   # upstream's AlfredTWEnv, all games at once
    episodes = alfworld.play(env, n, react_prompts, alfworld.Policy(model_dir).complete)
    score = alfworld.success_rate(episodes)

The reference is RD-Agent autorl_bench's benchmarks/alfworld/eval.py (ReAct's alfworld.ipynb): for each game,
the opening observation without its banner (`initial_observation`), the ReAct prompt of two worked examples of
the game's task type from react_prompts.json (`react_prompt`), then at most 50 steps of: the model completes
prompt + observation + "\\n>" + history as plain text (no chat template), greedy, at most 100 new tokens, cut at
the first newline (GENERATION); the action is that text stripped; the env's feedback is cleaned (`process_ob`),
"OK." after a `think:` action; history grows by " {action}\\n{observation}\\n>". A game is won when the env's
info "won" says so; the score is the percentage of games won. Games of no known task type are skipped
(`prompt_key` is None), as the reference skips them.

Where this differs from the reference, by design: all games of a split are played in lockstep, one batched
generate call per step over the games still running (the reference plays one game at a time, one call per step;
greedy decoding makes each game's episode the same either way, up to the last bits of batched arithmetic).
The env is `alfworld.agents.environment` exactly as upstream's: the real package when installed, else the
stand-in (tasks/hflm/standins/alfworld) the server puts on the path; either way a batch's games share one process
(`init_env_in_one_process`), where upstream's init_env forks one per game.
"""

import dataclasses
import os

from . import gpu
from .inference import (GenerationParams, attention_heads, cut_at_stop, default_backend, end_token_ids, generate,
                        prompt_token_ids, tensor_parallel_size)

# The reference's TASK_PREFIXES: a game's folder name prefix -> the key of its examples in react_prompts.json.
TASK_PREFIXES = {
    "pick_and_place": "put",
    "pick_clean_then_place": "clean",
    "pick_heat_then_place": "heat",
    "pick_cool_then_place": "cool",
    "look_at_obj": "examine",
    "pick_two_obj": "puttwo",
}
MAX_STEPS = 50
GENERATION = GenerationParams(max_new_tokens=100, temperature=0.0, stop=("\n",), chat_template=False)
SPLIT_PATHS = {"train": "train", "eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen"}


def config(data_root):
    """The reference's base_config.yaml (alfworld's own, text env, DAgger's 50 steps) with $ALFWORLD_DATA = data_root."""
    json_dir = os.path.join(data_root, "json_2.1.1")
    return {
        "dataset": {"data_path": os.path.join(json_dir, "train"), "eval_id_data_path": os.path.join(json_dir, "valid_seen"),
                    "eval_ood_data_path": os.path.join(json_dir, "valid_unseen"), "num_train_games": -1, "num_eval_games": -1},
        "logic": {"domain": os.path.join(data_root, "logic", "alfred.pddl"), "grammar": os.path.join(data_root, "logic", "alfred.twl2")},
        "env": {"type": "AlfredTWEnv", "domain_randomization": False, "task_types": [1, 2, 3, 4, 5, 6],
                "expert_timeout_steps": 150, "expert_type": "handcoded", "goal_desc_human_anns_prob": 0.0},
        "controller": {"type": "oracle", "debug": False, "load_receps": True},
        "general": {"random_seed": 42, "use_cuda": True, "task": "alfred", "training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": MAX_STEPS}},
    }


def open_games(data_root, split, game_files=None, limit=None):
    """(env, number of games): upstream's AlfredTWEnv over data_root's split, every game in one batch, so that one
    reset() loads each game once. game_files: only these, from the split's own list (a file may come several times:
    a group of episodes of one game); limit: only the split's first `limit` games. The env plays them in its own
    seeded order, and each episode names its game."""
    from alfworld.agents.environment import get_environment

    tw_env = get_environment("AlfredTWEnv")(config(data_root), train_eval=split)
    if game_files is not None:
        unknown = sorted(set(game_files) - set(tw_env.game_files))
        if unknown:
            raise ValueError(f"{unknown[0]} is not a game of {split} under {data_root}")
        tw_env.game_files = list(game_files)  # init_env registers exactly this list, upstream as here
        tw_env.num_games = len(game_files)
    if limit is not None:
        tw_env.game_files = tw_env.game_files[:limit]
        tw_env.num_games = len(tw_env.game_files)
    if tw_env.num_games == 0:
        raise ValueError(f"{data_root} holds no {split} games ({SPLIT_PATHS[split]}/): prepare the task's assets again")
    return init_env_in_one_process(tw_env, tw_env.num_games), tw_env.num_games


def init_env_in_one_process(tw_env, batch_size):
    """tw_env.init_env(batch_size) with every game in this process. Upstream's init_env registers the games with
    textworld.gym's asynchronous=True, one forked process per game (a 67-game half: 67 processes); textworld's
    synchronous batch env plays the same games in the same order in one. The stand-in has no textworld, and its
    batch env is one process already. Untested against the real package here (it cannot be installed)."""
    try:
        import textworld.gym
    except ImportError:
        return tw_env.init_env(batch_size=batch_size)
    register = textworld.gym.register_games

    def synchronous(*args, **kwargs):  # upstream calls textworld.gym.register_games by attribute, at init_env
        return register(*args, **{**kwargs, "asynchronous": False})

    textworld.gym.register_games = synchronous
    try:
        return tw_env.init_env(batch_size=batch_size)
    finally:
        textworld.gym.register_games = register


def game_name(gamefile):
    """The reference's game name: "<task folder>/<trial folder>" of the game file's path."""
    return "/".join(gamefile.split("/")[-3:-1])


def prompt_key(name):
    """The react_prompts.json key of the game's task type (put, clean, heat, cool, examine, puttwo), or None."""
    return next((key for prefix, key in TASK_PREFIXES.items() if name.startswith(prefix)), None)


def react_prompt(react_prompts, key):
    """The reference's few-shot prefix: the instruction, examples _1 then _0 of the type, "Here is the task."."""
    return ("Interact with a household to solve a task. Here are two examples.\n"
            + react_prompts[f"react_{key}_1"] + react_prompts[f"react_{key}_0"] + "\nHere is the task.\n")


def initial_observation(ob):
    """The opening observation without TextWorld's banner (everything before the first blank line)."""
    return "\n".join(ob.split("\n\n")[1:])


def process_ob(ob):
    """The reference's (ReAct's) cleaning of a step's feedback: an old TextWorld's "You arrive at loc N. " cut off."""
    if ob.startswith("You arrive at loc "):
        ob = ob[ob.find(". ") + 2:]
    return ob


def step_prompt(prompt, actions, observations):
    """What the model completes after len(actions) steps: prompt + " {action}\\n{observation}\\n>" per step."""
    return prompt + "".join(f" {a}\n{o}\n>" for a, o in zip(actions, observations))


def play(env, n_games, react_prompts, complete, max_steps=MAX_STEPS):
    """Plays the n_games that env.reset() loads (an env from open_games) in lockstep; complete(prompts) -> texts.

    Returns one episode per game, in the env's order: {"name", "gamefile", "prompt_key", "prompt" (the few-shot
    prefix, the opening observation and "\\n>"), "completions" (raw), "actions", "observations", "won", "steps"};
    a game of no known type has prompt_key None and is not played.
    """
    obs, infos = env.reset()
    episodes = []
    for i in range(n_games):
        name = game_name(infos["extra.gamefile"][i])
        key = prompt_key(name)
        prompt = (react_prompt(react_prompts, key) + initial_observation(obs[i]) + "\n>") if key else None
        episodes.append({"name": name, "gamefile": infos["extra.gamefile"][i], "prompt_key": key, "prompt": prompt,
                         "completions": [], "actions": [], "observations": [], "won": False, "steps": 0})
    running = [i for i, e in enumerate(episodes) if e["prompt_key"]]
    for _ in range(max_steps):
        if not running:
            break
        texts = complete([step_prompt(episodes[i]["prompt"], episodes[i]["actions"], episodes[i]["observations"])
                          for i in running])
        commands = [""] * n_games
        for i, text in zip(running, texts):
            commands[i] = text.strip()
        obs, _scores, dones, infos = env.step(commands)
        still = []
        for i, text in zip(running, texts):
            episode = episodes[i]
            observation = "OK." if commands[i].startswith("think:") else process_ob(obs[i])
            episode["completions"].append(text)
            episode["actions"].append(commands[i])
            episode["observations"].append(observation)
            episode["steps"] += 1
            episode["won"] = bool(infos["won"][i])
            if not dones[i]:
                still.append(i)
        running = still
    env.close()
    return episodes


def success_rate(episodes):
    """(percentage won, won, played) over the episodes of known task types, as the reference counts them."""
    played = [e for e in episodes if e["prompt_key"]]
    won = sum(e["won"] for e in played)
    return (round(100.0 * won / len(played), 2) if played else 0.0), won, len(played)


def per_type(episodes):
    """{prompt key: {"won", "total"}}, as the reference's per_task summary."""
    out = {}
    for e in episodes:
        if e["prompt_key"]:
            entry = out.setdefault(e["prompt_key"], {"won": 0, "total": 0})
            entry["won"] += int(e["won"])
            entry["total"] += 1
    return out


class Policy:
    """A checkpoint as the ReAct agent's model, loaded once for all the steps of a play: complete(prompts) -> texts.

    transformers: hflm.inference.generate per step (it keeps the model loaded while the folder is unchanged).
    vllm: one engine for the whole play (hflm.inference starts one per call, which per step would cost its start-up
    fifty times), with inference's tokenization, stop and end-of-sequence rules; close() shuts it down. Sampled
    play (temperature > 0) seeds each step's call with params.seed + the step (on vLLM, each request its own seed
    from that), so a play is reproducible.
    Untested on vLLM here (no GPU in CI), as hflm.inference's vLLM backend.
    """

    def __init__(self, model_dir, params=GENERATION, backend=None):
        self.model_dir, self.params, self.calls = model_dir, params, 0
        self.backend = backend or default_backend()
        self.llm = None
        if self.backend == "vllm":
            import torch
            from transformers import AutoTokenizer
            from vllm import LLM

            self.tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
            heads, kv_heads = attention_heads(model_dir)
            self.llm = LLM(model=model_dir, tensor_parallel_size=tensor_parallel_size(torch.cuda.device_count(), heads, kv_heads),
                           dtype=gpu.dtype_for(gpu.capabilities()), trust_remote_code=False, seed=params.seed)

    def complete(self, prompts):
        self.calls += 1
        params = dataclasses.replace(self.params, seed=self.params.seed + self.calls) if self.params.temperature > 0 else self.params
        if self.llm is None:
            return generate(self.model_dir, prompts, params, backend=self.backend)
        from vllm import SamplingParams

        sampled = params.temperature > 0
        # A request's seed fixes its samples: the same prompt under one seed (a rollout group's episodes at their
        # first step) would give the same text, so each request of the call gets its own seed.
        sampling = [SamplingParams(n=1, temperature=params.temperature, top_p=params.top_p if sampled else 1.0,
                                   max_tokens=params.max_new_tokens, stop=list(params.stop),
                                   stop_token_ids=end_token_ids(self.tokenizer, self.model_dir),
                                   seed=(params.seed + 1_000_003 * k) % 2**31, skip_special_tokens=True)
                    for k in range(len(prompts))]
        encoded = prompt_token_ids(self.tokenizer, prompts, params.chat_template)
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in encoded], sampling)
        return [cut_at_stop(request.outputs[0].text, params.stop) for request in outputs]

    def close(self):
        if self.llm is not None:
            self.llm.llm_engine.engine_core.shutdown()
            self.llm = None


def sample_episodes(args, rows, indices, model_dir, backend):
    """hflm.rollouts for alfworld: args.group_size episodes of each chosen train game (rows[i]["gamefile"], relative
    to --data's folder), played as the grader plays but sampled at args.temperature / args.top_p. Writes one JSON
    line per episode, each chunk of games as soon as it is played: {"group", "prompt_id", "gamefile", "name",
    "prompt_key", "prompt", "completions", "actions", "observations", "won", "steps", "reward": 1.0 if won else 0.0}."""
    import json
    import sys
    import time

    data_dir = os.path.dirname(os.path.abspath(args.data))
    with open(os.path.join(data_dir, "react_prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    params = dataclasses.replace(GENERATION, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                 top_p=args.top_p, seed=args.seed * 1_000_003 % 2**31)
    policy = Policy(model_dir, params, backend)
    # A vLLM engine plays every episode at once; on CPU a few games at a time, each chunk written when done.
    per_call = len(indices) if backend == "vllm" else max(1, 32 // args.group_size)
    won = 0
    start = time.time()
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            for first in range(0, len(indices), per_call):
                groups = range(first, min(first + per_call, len(indices)))
                files = {g: os.path.normpath(os.path.join(data_dir, rows[indices[g]]["gamefile"])) for g in groups}
                env, n = open_games(os.path.join(data_dir, "alfworld"), "train",
                                    game_files=[files[g] for g in groups for _ in range(args.group_size)])
                by_file = {}
                for episode in play(env, n, prompts, policy.complete):
                    by_file.setdefault(os.path.normpath(episode.pop("gamefile")), []).append(episode)
                for g in groups:
                    for episode in by_file[files[g]]:
                        won += episode["won"]
                        line = {"group": g, "prompt_id": indices[g], "gamefile": rows[indices[g]]["gamefile"], **episode,
                                "reward": float(episode["won"])}
                        out.write(json.dumps(line, ensure_ascii=False) + "\n")
                out.flush()
                print(f"rollouts: {groups.stop}/{len(indices)} groups in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    finally:
        policy.close()
    print(json.dumps({"episodes": args.n, "mean_reward": round(won / args.n, 4), "out": args.out}))
    return 0
