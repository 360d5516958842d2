"""Agents: policies that read an observation and return an action string.

An agent is named three ways (:func:`make_agent`, ``bench run --agent``):

- a built-in, from :data:`AGENTS`: ``reference`` (the oracle: replays the task's reference
  trajectory; the upper bound), ``keyword`` (a non-LLM baseline), ``llm`` (the LLM agent and its
  memory strategies, :mod:`webfreeze.agents.llm_agent`);
- ``package.module:Class``: any importable class with ``reset`` and ``act`` (worker processes
  import it by the same name, so it must be importable there too);
- a name an installed package declares in the ``webfreeze.agents`` entry-point group.

The runner gives an agent a :class:`TaskView` (never the ground truth), and the reference
trajectory only when its class sets ``oracle = True``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from importlib.metadata import entry_points
from typing import Any

from .base import Agent, AgentError, TaskView
from .baseline import KeywordAgent
from .reference import ReferenceAgent
from .services import AgentServices

ENTRY_POINT_GROUP = "webfreeze.agents"


def _llm_agent():
    from .llm_agent import LLMAgent  # imports the LLM client: only when asked for

    return LLMAgent


# name -> class, or a function returning the class (built-ins whose imports are heavy)
AGENTS: dict[str, Any] = {"reference": ReferenceAgent, "keyword": KeywordAgent, "llm": _llm_agent}


def _installed() -> dict:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_agents() -> list[str]:
    """Built-in agent names and those installed packages declare."""
    return sorted(set(AGENTS) | set(_installed()))


def agent_class(spec: str) -> type:
    """The class ``spec`` names: a built-in, ``package.module:Class``, or an entry point."""
    if not isinstance(spec, str) or not spec.strip():
        raise AgentError("an agent is named by a built-in name, package.module:Class or an installed entry point")
    if spec in AGENTS:
        found = AGENTS[spec]
        cls = found if inspect.isclass(found) else found()
    elif ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise AgentError(f"agent {spec!r}: cannot import {module_name!r} ({exc})") from None
        except Exception as exc:  # the plug-in's own import-time error
            raise AgentError(f"agent {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
        cls = module
        for part in attr.split("."):
            cls = getattr(cls, part, None)
            if cls is None:
                raise AgentError(f"agent {spec!r}: {module_name!r} has no {attr!r}")
    else:
        ep = _installed().get(spec)
        if ep is None:
            raise AgentError(f"unknown agent {spec!r} (known: {', '.join(known_agents())}; "
                             f"or give package.module:Class)")
        try:
            cls = ep.load()
        except Exception as exc:
            raise AgentError(f"agent {spec!r}: its entry point {ep.value!r} failed to load: "
                             f"{type(exc).__name__}: {exc}") from None
    if not inspect.isclass(cls) or not all(callable(getattr(cls, m, None)) for m in ("reset", "act")):
        raise AgentError(f"agent {spec!r} is not an agent class (it needs reset() and act() methods)")
    return cls


def agent_settings(spec: str) -> list[str] | None:
    """The settings agent ``spec`` takes (``bench run --agent-config KEY=VALUE``); None when its
    ``__init__`` takes any (``**settings``: it checks its own). A class may declare them
    (``setting_names``, a tuple), as the LLM agent does: its constructor also takes config objects."""
    cls = agent_class(spec)
    declared = getattr(cls, "setting_names", None)
    if isinstance(declared, tuple):
        return list(declared)
    params = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def is_oracle(agent) -> bool:
    """Whether an agent (or agent class) declares itself an oracle (it gets the reference)."""
    return getattr(agent, "oracle", False) is True


def make_agent(spec: str, **config) -> Agent:
    """A fresh agent named ``spec`` (see the module doc) with the settings ``config``; an unknown
    agent, an unknown setting or a bad value is an :class:`AgentError`."""
    cls = agent_class(spec)
    known = agent_settings(spec)
    for key in config if known is not None else ():
        if key not in known:
            raise AgentError(f"agent {spec!r} has no setting {key!r} "
                             f"({'its settings: ' + ', '.join(known) if known else 'it takes none'})")
    try:
        return cls(**config)
    except AgentError:
        raise
    except (TypeError, ValueError) as exc:
        raise AgentError(f"agent {spec!r}: bad settings ({exc})") from None


def check_agent(spec: str, settings: dict) -> dict:
    """Build agent ``spec`` with ``settings`` once, only to check them before anything runs (the
    CLI, the runner and a study all refuse bad settings this way), and describe it: ``config``
    (what its ``config()`` returns, else ``{}``), ``oracle`` and ``wants_local_model``. A bad agent
    or setting is :func:`make_agent`'s :class:`AgentError`. The agent is closed again, quietly: one
    that cannot close is no reason to refuse its settings."""
    agent = make_agent(spec, **settings)
    try:
        return {"config": agent.config() if callable(getattr(agent, "config", None)) else {},
                "oracle": is_oracle(agent), "wants_local_model": bool(getattr(agent, "wants_local_model", False))}
    finally:
        close = getattr(agent, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


__all__ = ["AGENTS", "Agent", "AgentError", "AgentServices", "ENTRY_POINT_GROUP", "KeywordAgent", "ReferenceAgent",
           "TaskView", "agent_class", "agent_settings", "check_agent", "is_oracle", "known_agents", "make_agent"]
