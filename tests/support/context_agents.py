"""Agents for the long-context tests (``context_agents:...``, tests/ on the path): the reference
agent, noting on its first step what prior context its task view held, so that a test can check
that the agent saw exactly the composed text."""

from __future__ import annotations

import hashlib

from webfreeze.agents.reference import ReferenceAgent


class ContextProbe(ReferenceAgent):
    """The reference agent; its first step's agent fields carry ``context_seen`` (the context's
    token count and the SHA-256 of its text, or None when the view held no context)."""

    def reset(self, task) -> None:
        ctx = task.get("context")
        self._seen = None if ctx is None else {
            "tokens": ctx["tokens"], "target_tokens": ctx["target_tokens"], "a1_task": ctx["a1_task"],
            "parts": [s["part"] for s in ctx["sessions"]],
            "sha256": hashlib.sha256(ctx["text"].encode("utf-8")).hexdigest()}
        self._first = True
        super().reset(task)

    def act(self, obs: dict) -> dict:
        out = super().act(obs)
        if self._first:
            out["context_seen"] = self._seen
            self._first = False
        return out


class FailingA1(ContextProbe):
    """Fails in ``act`` on every subtask A1 (ids ending in ``-a1``): its episode ends as an error."""

    def reset(self, task) -> None:
        self._fail = str(task.get("id")).endswith("-a1")
        super().reset(task)

    def act(self, obs: dict) -> dict:
        if self._fail:
            raise RuntimeError("this agent fails on subtask A1")
        return super().act(obs)
