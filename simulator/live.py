"""The environment's live page source: pages from live sites through a recording proxy.

A :class:`~webfreeze.simulator.env.WebEnv` normally takes every page from its archive's replay.
Given ``EnvConfig(upstream={"proxy": URL, "ca_file": PEM, "mode": "live"|"miss"})`` the same replay
sends every request (``live``) or each request it cannot answer (``miss``) to that proxy, a
recording proxy some orchestration started (webfreeze/runs/live.py; this stage never starts one), and
answers with what the proxy recorded: the determinism runtime is injected as in any replay (frozen
clock at the capture time, seeded randomness, the settle rule), so a later offline replay of the
archive shows the agent what the live run showed it. Both backends share this: the browser's
requests reach the replay server as always, the text backend asks the replay in-process.

The network is reached only through that proxy: the browser's only proxy is the replay server, and
the replay forwards nothing but page requests (never the browser's own background traffic).
"""

from __future__ import annotations

import uuid

from webfreeze.replayer.upstream import UPSTREAM_MODES, Upstream, UpstreamError

__all__ = ["UPSTREAM_MODES", "episode_tag", "open_upstream"]


def open_upstream(settings: dict | None, error=UpstreamError) -> Upstream | None:
    """The :class:`Upstream` for ``EnvConfig.upstream`` (None: a hermetic replay); a bad setting
    raises ``error`` in one line."""
    if settings is None:
        return None
    if not isinstance(settings, dict) or not settings.get("proxy"):
        raise error("upstream must be a dict with a 'proxy' URL (and 'ca_file', 'mode')")
    try:
        return Upstream.from_settings(settings)
    except UpstreamError as exc:
        raise error(str(exc)) from None


def episode_tag(task_id: str | None) -> str:
    """The tag of one episode's requests: the task's id, then a random suffix so that two episodes
    of the same task get two capture sessions."""
    return f"{task_id or 'episode'} {uuid.uuid4().hex[:12]}"
