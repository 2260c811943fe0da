"""Multi-step episodes for the interactive (level 3) tasks: a checkpoint acting as the policy in a text environment.

    from microlm import episodes
    records = episodes.play(model, envs, items, format_prompt, max_steps=50, max_new_tokens=24)

Every environment has the gym-style API
    reset(seed, options=None) -> (observation, info)      info["task_type"]
    step(action) -> (observation, reward, done, info)      info["success"] once done
and a game is one JSON object {"seed": int, ...}: reset gets its seed and the whole object as options.

All episodes advance in lockstep: at each step the policy writes the next action of every
unfinished episode in one batched generate call; the action is the first line of the
completion, stripped. An episode ends when its env says done, or after max_steps. Greedy
play (temperature 0), and sampling with a given seed, are deterministic. One record per episode:
    {"seed", "task_type", "steps": [{"observation", "action", "reward", "done"}], "return", "success", "length"}
where an observation is what the policy saw before acting. summarize scores played episodes;
greedy_success(model, games, make_env, format_prompt, max_steps, max_new_tokens) is the success rate of greedy play.

rollouts_main is a task's whole rollout command line (the static tasks' options, see microlm.sampling):
n episodes over n / group-size distinct training games, group-size episodes per game (the groups GRPO compares);
torch runs one thread unless --threads says otherwise.

grade_main is a task's whole grader: it plays every held-out game of EVAL_DIR/{public,private}.jsonl greedily,
single-threaded (so the same weights always get the same score), and writes per split
    {"score": 100 * success rate, "successes", "total", "mean_return", "success_<task type>": 0-100, ...}
"""

import json
import sys
import time

from . import grading, sampling
from .decode import generate

# Keeps the sampling seeds of different steps (and of neighbouring --seed values) apart.
_STEP_SEED_STRIDE = 1_000_003


def play(model, envs, items, format_prompt, max_steps, max_new_tokens, temperature=0.0, top_k=None, seed=None, batch_size=64):
    """Plays one episode in each env, env i on game items[i]; returns the records in the same order."""
    if len(envs) != len(items):
        raise ValueError(f"{len(envs)} envs for {len(items)} games: give one env per game")
    records, observations = [], []
    for env, item in zip(envs, items):
        observation, info = env.reset(item["seed"], options=item)
        observations.append(observation)
        records.append({"seed": item["seed"], "task_type": info.get("task_type"), "steps": [], "return": 0.0, "success": False, "length": 0})
    active = list(range(len(envs)))
    for step in range(max_steps):
        if not active:
            break
        step_seed = None if seed is None else seed * _STEP_SEED_STRIDE + step
        completions = generate(
            model, [format_prompt(observations[i]) for i in active], max_new_tokens,
            temperature=temperature, top_k=top_k, seed=step_seed, batch_size=batch_size,
        )
        still_active = []
        for i, completion in zip(active, completions):
            action = completion.split("\n", 1)[0].strip()
            observation, reward, done, info = envs[i].step(action)
            record = records[i]
            record["steps"].append({"observation": observations[i], "action": action, "reward": float(reward), "done": bool(done)})
            record["return"] += float(reward)
            record["length"] += 1
            if done:
                record["success"] = bool(info.get("success", False))
            else:
                still_active.append(i)
            observations[i] = observation
        active = still_active
    return records


def summarize(records):
    """Success rate (0-100), mean return and success rate per task type of played episodes."""
    n = len(records)
    result = {
        "score": round(100.0 * sum(r["success"] for r in records) / n, 2),
        "successes": sum(r["success"] for r in records),
        "total": n,
        "mean_return": round(sum(r["return"] for r in records) / n, 4),
        "mean_length": round(sum(r["length"] for r in records) / n, 2),
    }
    for task_type in sorted({str(r["task_type"]) for r in records}):
        of_type = [r for r in records if str(r["task_type"]) == task_type]
        result[f"success_{task_type}"] = round(100.0 * sum(r["success"] for r in of_type) / len(of_type), 2)
    return result


def greedy_success(model, games, make_env, format_prompt, max_steps, max_new_tokens, batch_size=64):
    """Success rate (0-100) of one greedy episode per game, e.g. to follow training on a few training games."""
    records = play(model, [make_env() for _ in games], games, format_prompt, max_steps, max_new_tokens, batch_size=batch_size)
    return summarize(records)["score"]


def grade_main(argv, doc, grader_version, make_env, format_prompt, max_steps, max_new_tokens):
    """Parses the grader's command line, plays the held-out games greedily and writes the scores as JSON.

    The caller must have set OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 before importing torch.
    A checkpoint that fails validation exits with status 2 and the reason on stderr, writing no score."""
    args = grading.parse(doc, "where to write the scores (JSON)", argv)
    model = grading.load_or_exit(args.checkpoint)
    result = {"grader_version": grader_version}
    for split in grading.SPLITS:
        games = grading.load_split(args.eval_dir, split)
        start = time.time()
        records = play(model, [make_env() for _ in games], games, format_prompt, max_steps, max_new_tokens, batch_size=len(games))
        result[split] = summarize(records)
        print(f"{split}: {result[split]['successes']}/{len(games)} successes in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return result


def rollouts_main(argv, prog, doc, make_env, format_prompt, max_steps, max_new_tokens):
    """Parses the rollout command line, plays the episodes and writes them as JSONL; prints the summary."""
    parser = sampling.parser(prog, doc, 'JSONL of training games, {"seed": int, ...}', max_new_tokens=max_new_tokens)
    # An episode is many small batched generate calls: one torch thread is faster than two and spends half the CPU.
    parser.set_defaults(threads=1)
    args = parser.parse_args(argv)
    model, items, indices = sampling.prepare(
        args,
        lambda it: isinstance(it, dict) and isinstance(it.get("seed"), int),
        'every --data line must be a JSON object with an integer "seed"',
    )
    games = [i for i in indices for _ in range(args.group_size)]
    print(f"rollouts: playing {len(games)} episodes", file=sys.stderr, flush=True)
    start = time.time()
    records = play(
        model, [make_env() for _ in games], [items[i] for i in games], format_prompt, max_steps, args.max_new_tokens,
        temperature=args.temperature, top_k=args.top_k, seed=args.seed, batch_size=args.batch_size,
    )
    print(f"rollouts: played in {time.time() - start:.1f}s", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        for game_index, record in zip(games, records):
            f.write(json.dumps({"game_index": game_index, **record}) + "\n")
    n = len(records)
    summary = {
        "episodes": n,
        "mean_return": round(sum(r["return"] for r in records) / n, 4),
        "success_rate": round(sum(r["success"] for r in records) / n, 4),
        "out": args.out,
    }
    print(json.dumps(summary))
    return summary
