"""Upstream's web_agent_site.envs, text env only (upstream also registers the Selenium WebAgentSiteEnv with gym)."""

from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv

__all__ = ["WebAgentTextEnv"]
