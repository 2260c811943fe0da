"""Speed of an interactive (level 3) task: its environment alone, and rollouts with its base model as the policy.

    /usr/bin/python3 bench/level3.py --task-dir tasks/micro-webshop --package micro_webshop [--env-steps 50000] [--episodes 256]

Prints one JSON object:
  env_steps_per_s        reset/step of the environment alone, random admissible actions, one thread
  rollout_episodes_per_s the task's rollout command (what launch_rollouts runs in the sandbox) with the base model
                         at temperature 1, on the host, torch with every core; rollout_steps_per_s counts policy steps.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time


def lib_dir(task_dir, package):
    """A folder holding microlm and the task's package, as the sandbox mounts them under /workspace/lib."""
    lib = tempfile.mkdtemp(prefix="a2rl-bench-lib-")
    os.symlink(os.path.join(os.path.dirname(task_dir), "microlm"), os.path.join(lib, "microlm"))
    os.symlink(os.path.join(task_dir, "env"), os.path.join(lib, package))
    return lib


def env_step_rate(module, games, steps):
    rng = random.Random(0)
    env = module.make_env()
    done_steps, episodes = 0, 0
    start = time.perf_counter()
    while done_steps < steps:
        _, info = env.reset(games[episodes % len(games)]["seed"], options=games[episodes % len(games)])
        episodes += 1
        for _ in range(module.MAX_STEPS):
            _, _, done, info = env.step(rng.choice(info["admissible"]))
            done_steps += 1
            if done:
                break
    seconds = time.perf_counter() - start
    return {"env_steps": done_steps, "env_episodes": episodes, "env_steps_per_s": round(done_steps / seconds)}


def rollout_rate(task_dir, package, lib, episodes):
    out = os.path.join(lib, "rollouts.jsonl")
    command = [
        sys.executable, "-m", f"{package}.rollouts",
        "--checkpoint", os.path.join(task_dir, "model"), "--data", os.path.join(task_dir, "data", "train.jsonl"),
        "--n", str(episodes), "--temperature", "1", "--seed", "0", "--out", out,
    ]
    start = time.perf_counter()
    subprocess.run(command, env=dict(os.environ, PYTHONPATH=lib), check=True, capture_output=True)
    seconds = time.perf_counter() - start
    with open(out) as f:
        records = [json.loads(line) for line in f]
    steps = sum(r["length"] for r in records)
    return {
        "rollout_episodes": len(records),
        "rollout_seconds": round(seconds, 2),
        "rollout_episodes_per_s": round(len(records) / seconds, 1),
        "rollout_steps_per_s": round(steps / seconds, 1),
        "rollout_success_rate": round(sum(r["success"] for r in records) / len(records), 4),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task-dir", required=True)
    parser.add_argument("--package", required=True)
    parser.add_argument("--env-steps", type=int, default=50_000)
    parser.add_argument("--episodes", type=int, default=256)
    args = parser.parse_args()
    task_dir = os.path.abspath(args.task_dir)
    lib = lib_dir(task_dir, args.package)
    try:
        sys.path.insert(0, lib)
        module = __import__(args.package)
        with open(os.path.join(task_dir, "data", "train.jsonl")) as f:
            games = [json.loads(line) for line in f if line.strip()]
        result = env_step_rate(module, games, args.env_steps)
        result.update(rollout_rate(task_dir, args.package, lib, args.episodes))
        print(json.dumps(result))
    finally:
        shutil.rmtree(lib)


if __name__ == "__main__":
    main()
