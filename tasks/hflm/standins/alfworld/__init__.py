"""A stand-in for the `alfworld` package (alfworld/alfworld), for hosts where it cannot be installed.

    from alfworld.agents.environment import get_environment
    env = get_environment("AlfredTWEnv")(config, train_eval="train").init_env(batch_size=1)
    obs, infos = env.reset()                       # obs: a tuple of texts; infos: {key: [one value per game]}
    obs, scores, dones, infos = env.step(["go to desk 1"])

Only the surface the full tier's alfworld task uses is here, with upstream's module names, signatures, return
shapes and info keys (`won`, `admissible_commands`, `extra.gamefile`, and `extra.expert_plan` on the train split
under DAgger's settings). The games are played by `alfworld.household` at upstream's semantics (alfred.pddl,
alfred.twl2, the handcoded expert): the project's small households (tasks/hflm-tests/fixture_smoke_alfworld.py,
from micro-alfworld's layouts), or alfworld-download's real game files, read from their PDDL problem. With the
real package installed the full tier mounts no stand-in (src/tasks/full-task.ts), and the task's code runs
unchanged. What differs from upstream is listed in tasks/alfworld/README.md.
"""

__version__ = "0.0.0+standin"
