"""The skeleton the level-3 tasks' calibration.py share: the base model played greedy and sampled as launch_rollouts samples.

    import os
    os.environ["OMP_NUM_THREADS"] = "1"       # before torch loads: sampled actions then do not
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # depend on the core count

    import micro_x
    from microlm import calibration

    def figures(games, records): ...          # the task's own percentages of a list of episodes

    def calibrate(checkpoint_dir, data_file, greedy_games=600, sampled_games=160, seed=calibration.SEED):
        return calibration.calibrate(checkpoint_dir, data_file, micro_x, figures, greedy_games, sampled_games, seed)

    if __name__ == "__main__":
        calibration.main(__doc__, HERE, calibrate)

Sampled play picks and plays games as microlm.episodes.rollouts_main does (`launch_rollouts` with
episodes sampled_games * GROUP_SIZE, group_size GROUP_SIZE and seed SEED plays the same episodes).
"""

import argparse
import json
import os
import random

import torch

from . import checkpoint, data, episodes

GROUP_SIZE = 8  # a launch_rollouts group
SEED = 0
BATCH_SIZE = 64  # the rollout sampler's default: sampling draws per batch, so it must match


def percent(flags):
    return round(100.0 * sum(flags) / len(flags), 1) if flags else None


def calibrate(checkpoint_dir, data_file, env, figures, greedy_games, sampled_games, seed=SEED):
    """{greedy, sampled} figures(games, records) of the model, plus the share of sampled groups with a success.

    env is the task's package (make_env, format_prompt, MAX_STEPS, MAX_NEW_TOKENS); the games are seeded samples of data_file."""
    torch.set_num_threads(1)
    model = checkpoint.load(checkpoint_dir)
    games = data.read_jsonl(data_file)

    def play(items, **sampling):
        return episodes.play(model, [env.make_env() for _ in items], items, env.format_prompt, env.MAX_STEPS, env.MAX_NEW_TOKENS,
                             batch_size=BATCH_SIZE, **sampling)

    greedy_items = random.Random(seed).sample(games, greedy_games)
    greedy = play(greedy_items)
    # As rollouts_main picks and plays them: n / group-size distinct games, each played group-size times in a row.
    indices = random.Random(seed).sample(range(len(games)), sampled_games)
    sampled_items = [games[i] for i in indices for _ in range(GROUP_SIZE)]
    sampled = play(sampled_items, temperature=1.0, seed=seed)
    groups = [sampled[i : i + GROUP_SIZE] for i in range(0, len(sampled), GROUP_SIZE)]
    return {
        "greedy": {"episodes": len(greedy), **figures(greedy_items, greedy)},
        "sampled": {
            "temperature": 1.0,
            "episodes": len(sampled),
            **figures(sampled_items, sampled),
            # Groups with a success: the games where a reward-only learner has something to learn from.
            "groups_with_a_success": percent([any(r["success"] for r in g) for g in groups]),
        },
    }


def main(description, task_dir, calibrate):
    """The command line: --checkpoint (default the task's model/) and --data; prints calibrate's figures as JSON."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=os.path.join(task_dir, "model"))
    parser.add_argument("--data", default=os.path.join(task_dir, "data", "train.jsonl"))
    args = parser.parse_args()
    print(json.dumps(calibrate(args.checkpoint, args.data), indent=1))
