"""The environment's backends: their names, ``browser`` (Chromium through Playwright,
:mod:`.browser_backend`) and ``text`` (no browser, :mod:`.text_backend`), and :class:`Backend`, what
:class:`~webfreeze.simulator.env.WebEnv` asks of either. Kept apart from :mod:`.env` and light (no
backend is imported until :func:`open_backend` is called) so that the CLI, the runner and a study
can check a name without loading the environment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .actions import Action
    from .axtree import Tree
    from .env import WebEnv

BACKENDS = ("browser", "text")


def check_backend(name: str, error: type[Exception] = ValueError) -> None:
    """Refuse an unknown backend name: an ``error`` (the caller's own error class) whose message is
    one line naming the known ones."""
    if name not in BACKENDS:
        raise error(f"unknown backend {name!r} ({' or '.join(BACKENDS)})")


class Backend(Protocol):
    """What the environment calls on a backend. Both share the observation format
    (:mod:`.axtree`) and the action parser (:mod:`.actions`); a bad action is an error string, never
    an exception."""

    #: BrowserGym's own snapshots of the last observation (the browser backend with
    #: ``observation="browsergym"``), else None.
    bgym_raw: dict | None

    @property
    def url(self) -> str:
        """The URL of the page the last observation (or load) saw."""
        ...

    def take_answers(self) -> list[dict]:
        """How the replay answered each request since the last call (provenance records)."""
        ...

    def take_dialogs(self) -> list[dict]:
        """The JavaScript dialogs (``alert``, ``confirm``, ``prompt``, ``beforeunload``) pages opened
        since the last call, as answered: ``{"type", "message", "answer"}`` (none in the text
        backend, which runs no scripts)."""
        ...

    def reset(self, url: str) -> str | None:
        """Start an episode at ``url``: None, or one line saying why its page did not load."""
        ...

    def observe(self) -> tuple[Tree, bytes | None]:
        """The page as it is now: its tree and a screenshot (PNG) when one is asked for."""
        ...

    def act(self, a: Action, target: dict | None) -> str | None:
        """Carry out an action (on ``target``, its element in the last observation): None or an error line."""
        ...

    def open_pages(self) -> list[str]:
        """The URLs of the episode's open pages (tabs)."""
        ...

    def screenshot(self) -> bytes | None:
        """A PNG of the page now, outside the trajectory (None without a viewport)."""
        ...

    def close(self) -> None:
        """Release what the backend holds (browser, replay)."""
        ...


def open_backend(name: str, env: WebEnv) -> Backend:
    """The backend ``name`` for ``env`` (its replay server, configuration and last tree)."""
    check_backend(name)
    if name == "browser":
        from .browser_backend import BrowserBackend

        return BrowserBackend(env)
    from .text_backend import TextBackend

    return TextBackend(env)


__all__ = ["BACKENDS", "Backend", "check_backend", "open_backend"]
