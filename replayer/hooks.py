"""Site models: stateful hosts answered from per-session state before the archive is consulted.

A frozen archive cannot remember that an agent put something in a cart. A :class:`SiteModel`
registered for a host sees every replayed request to that host first; it answers the ones it
models (add to cart, check out, reserve a slot) from its own state and returns ``None`` for the
rest, which then come from the archive as usual. State is per replay session: :meth:`initial_state`
makes a fresh one for each ``reset(seed)``, and :meth:`export_state` turns it into JSON for
evaluation. The simulator supplies the concrete models (shop, booking); the replayer only calls them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from webfreeze.common.http import header_value, host_port

Headers = list[tuple[str, str]]


@dataclass
class ReplayRequest:
    method: str
    url: str
    headers: Headers
    body: bytes = b""

    def header(self, name: str, default: str | None = None) -> str | None:
        """The first value of header ``name`` (any case), else ``default``."""
        return header_value(self.headers, name, default)

    @property
    def path(self) -> str:
        return urlsplit(self.url).path or "/"

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.url).query, keep_blank_values=True))

    def form(self) -> dict[str, str]:
        """Fields of a form-encoded body."""
        ctype = (self.header("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            return {}
        return dict(parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True))

    def cookies(self) -> dict[str, str]:
        out = {}
        for part in (self.header("cookie") or "").split(";"):
            if "=" in part:
                k, v = part.split("=", 1)
                out[k.strip()] = v.strip()
        return out


@dataclass
class ReplayResponse:
    status: int = 200
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    reason: str = ""


class SiteModel:
    """Base class for a stateful host. Subclasses set ``hosts`` and override :meth:`handle`."""

    hosts: tuple[str, ...] = ()
    name: str = "site"

    def initial_state(self, seed: int) -> dict:
        return {}

    def handle(self, request: ReplayRequest, state: dict) -> ReplayResponse | None:
        """Answer ``request`` from ``state`` (mutating it), or return None to fall through."""
        return None

    def export_state(self, state: dict) -> dict:
        """A JSON-serialisable view of ``state`` for evaluation."""
        return state


def host_key(url: str) -> str:
    """host[:port] of a URL, lower-case, default ports dropped (how models are registered)."""
    return host_port(urlsplit(url))
