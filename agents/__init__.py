"""Agents: policies that read an observation and return an action string.

An agent is built by name from :data:`AGENTS` (``make_agent``); the runner (``webfreeze bench
run``) gives it each task with :meth:`Agent.reset` and asks :meth:`Agent.act` for one step at a
time. Agents here need no model and no network:

- ``reference``: replays the task's reference trajectory (as ``record session`` logs it), finding
  each target by role, name and CSS path; it answers only when the page showed the evidence.
- ``keyword``: a simple non-LLM baseline (search, follow the best-matching link, answer with the
  best-matching text).
"""

from __future__ import annotations

import inspect

from .base import Agent, AgentError
from .baseline import KeywordAgent
from .reference import ReferenceAgent

AGENTS: dict[str, type[Agent]] = {"reference": ReferenceAgent, "keyword": KeywordAgent}


def agent_settings(name: str) -> list[str] | None:
    """The settings agent ``name`` takes (``bench run --agent-config KEY=VALUE``); None when its
    ``__init__`` takes any (``**settings``: it checks its own)."""
    params = inspect.signature(AGENTS[name].__init__).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def make_agent(name: str, **config) -> Agent:
    """A fresh agent called ``name`` (one of :data:`AGENTS`) with the settings ``config``; an unknown
    agent, an unknown setting or a bad value is an :class:`AgentError`."""
    if name not in AGENTS:
        raise AgentError(f"unknown agent {name!r} (known: {', '.join(sorted(AGENTS))})")
    known = agent_settings(name)
    for key in config if known is not None else ():
        if key not in known:
            raise AgentError(f"agent {name!r} has no setting {key!r} "
                             f"({'its settings: ' + ', '.join(known) if known else 'it takes none'})")
    return AGENTS[name](**config)


__all__ = ["AGENTS", "Agent", "AgentError", "KeywordAgent", "ReferenceAgent", "agent_settings", "make_agent"]
