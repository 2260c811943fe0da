"""The stand-in's `alfworld.agents`: only `alfworld.agents.environment` (see the package docstring)."""
