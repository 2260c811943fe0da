"""A stand-in for the `alfworld` package (alfworld/alfworld), for hosts where it cannot be installed.

    from alfworld.agents.environment import get_environment
    env = get_environment("AlfredTWEnv")(config, train_eval="train").init_env(batch_size=1)
    obs, infos = env.reset()                       # obs: a tuple of texts; infos: {key: [one value per game]}
    obs, scores, dones, infos = env.step(["go to desk 1"])

Only the surface the full tier's alfworld task uses is here, with upstream's module names, signatures, return
shapes and info keys (`won`, `admissible_commands`, `extra.gamefile`, and `extra.expert_plan` on the train split
under DAgger's settings). The games are not ALFRED's: each game file holds a small household made by the project
(tasks/hflm/tests/fixture_smoke_alfworld.py, from micro-alfworld's layouts), played by `alfworld.household` in
ALFWorld's command language. A real game file (PDDL) is refused, saying to install the real package; with the
real package installed the full tier mounts no stand-in (src/tasks/full-task.ts), and the task's code runs
unchanged. What differs from upstream is listed in tasks/alfworld/README.md.
"""

__version__ = "0.0.0+standin"
