"""Serving an archive: request matching, the replay server (proxy and direct modes), determinism
injection, miss reports and stateful site hooks.

Public names (imported on first use): :class:`Replay` (the answerer, no sockets),
:class:`ReplayError`, :func:`load_rules_file` (``replay``); :class:`ReplayServer` (``server``: HTTP on
top of a Replay); :class:`Rules`, :func:`canonical_url` (``matching``); :class:`SiteModel` (``hooks``).
"""

from importlib import import_module

_PUBLIC = {
    "Replay": "replay", "ReplayError": "replay", "load_rules_file": "replay",
    "ReplayServer": "server",
    "Rules": "matching", "canonical_url": "matching",
    "SiteModel": "hooks",
}


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = sorted(_PUBLIC)
