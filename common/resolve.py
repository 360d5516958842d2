"""The ``--resolve`` table: ``HOST[:PORT]=ADDRESS:PORT`` entries, as ``record``, ``bench run --live``
and a live study's ``resolve`` give them. A string parser, here below the stages that need it, so
that reading a command line needs neither the recorder nor mitmproxy."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import WebfreezeError


class ResolveError(WebfreezeError, ValueError):
    """A ``--resolve`` entry that is not ``HOST[:PORT]=ADDRESS:PORT``."""


def parse_resolve(entries: Iterable[str] | None) -> dict[str, tuple[str, int]]:
    """``HOST[:PORT]=ADDRESS:PORT`` entries as a table: the host (lower-cased) -> (address, port)."""
    table: dict[str, tuple[str, int]] = {}
    for entry in entries or ():
        name, sep, target = entry.partition("=")
        addr, colon, port = target.rpartition(":")
        if not sep or not name or not colon or not addr or not port.isdigit() or not 0 < int(port) < 65536:
            raise ResolveError(f"--resolve {entry!r}: expected HOST=ADDRESS:PORT, e.g. scholar.test=127.0.0.1:8001")
        table[name.lower()] = (addr.strip("[]"), int(port))
    return table
