"""get_environment(env_type), as upstream's `alfworld.agents.environment`: the stand-in has the text env only."""


def get_environment(env_type):
    if env_type == "AlfredTWEnv":
        from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

        return AlfredTWEnv
    if env_type in ("AlfredThorEnv", "AlfredHybrid"):
        raise NotImplementedError(
            f"{env_type} needs AI2-THOR, which the alfworld stand-in does not have: use 'AlfredTWEnv' (text only)"
        )
    raise NotImplementedError(f"Environment {env_type} is not implemented.")
