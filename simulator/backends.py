"""The environment's backends by name: ``browser`` (Chromium through Playwright) and ``text`` (no
browser). Kept apart from :mod:`.env` so that the CLI, the runner and a study can check a name
without loading the environment."""

from __future__ import annotations

BACKENDS = ("browser", "text")


def check_backend(name: str, error: type[Exception] = ValueError) -> None:
    """Refuse an unknown backend name: an ``error`` (the caller's own error class) whose message is
    one line naming the known ones."""
    if name not in BACKENDS:
        raise error(f"unknown backend {name!r} ({' or '.join(BACKENDS)})")


__all__ = ["BACKENDS", "check_backend"]
