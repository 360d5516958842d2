"""The agent interface the runner drives."""

from __future__ import annotations

import re
import unicodedata


class AgentError(RuntimeError):
    """An agent cannot be built or cannot run this task: one line."""


class Agent:
    """``reset(task, reference)`` once per episode, then ``act(obs)`` until the episode ends.

    ``task`` is the suite line (a dict: id, instruction, start_url, ...); ``reference`` the task's
    reference trajectory when it has one (agents other than ``reference`` ignore it). ``act`` returns
    ``{"action": str, ...agent fields}`` (thought, memory, ...), recorded in the trajectory.
    """

    name = "agent"

    def config(self) -> dict:
        """What identifies this agent's behaviour (written to the run manifest and trajectories)."""
        return {}

    def reset(self, task: dict, reference: dict | None = None) -> None:
        raise NotImplementedError

    def act(self, obs: dict) -> dict:
        raise NotImplementedError


def norm(text) -> str:
    """Text compared loosely: NFKC, case-folded, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", str(text or "")).casefold().split())


def quote(text: str) -> str:
    """A Python string literal for a BrowserGym action argument."""
    return repr(str(text))


_WORD = re.compile(r"[\w.\-]+", re.UNICODE)


def words(text: str) -> list[str]:
    return [w.strip(".-") for w in _WORD.findall(norm(text)) if w.strip(".-")]
