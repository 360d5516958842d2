"""HTTP odds every stage needs: a URL's ``host[:port]`` key, splitting a ``host:port`` text,
finding a header in a list of ``(name, value)`` pairs, and the page a URL shows (a hash route)."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import SplitResult, urldefrag

# the port a scheme implies; a URL that names it is the same place as one that does not
DEFAULT_PORTS = {"http": 80, "https": 443}


def host_port(parts: SplitResult) -> str:
    """``host[:port]`` of a split URL: the host lower-cased (an IPv6 address without its brackets,
    as ``SplitResult.hostname`` gives it), the port left out when it is the scheme's default or
    when it is not a valid port number."""
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # "host:99999" or "host:abc": the key is the host alone
        port = None
    if port is None or DEFAULT_PORTS.get(parts.scheme.lower()) == port:
        return host
    return f"{host}:{port}"


def split_host_port(text: str) -> tuple[str, str]:
    """``(host, port)`` of a ``host:port`` text (a Host header, a CONNECT target): the host
    lower-cased without IPv6 brackets, the port as written after the last colon (``""`` when
    there is no colon)."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = text, ""
    return host.strip("[]").lower(), port


def header_value(headers: Iterable[tuple[str, str]], name: str, default: str | None = None) -> str | None:
    """The first value of header ``name`` (any case) among ``(name, value)`` pairs, else ``default``."""
    lname = name.lower()
    n = len(lname)
    for k, v in headers:
        # lower-casing only names that can match: this runs for every replayed request
        if len(k) == n and k.lower() == lname:
            return v
    return default


__all__ = ["DEFAULT_PORTS", "header_value", "host_port", "split_host_port"]


def page_url(url: str) -> str:
    """The page a URL shows: the URL without its fragment (an anchor in the same document), unless
    the fragment is a route of a single-page application (``#/guide``, ``#!/guide``: the hash
    routers of Docsify, Vue, Angular), which shows another page of the same document."""
    base, fragment = urldefrag(url)
    route = fragment[1:] if fragment.startswith("!") else fragment
    # (``#/``, ``#!`` and ``#!/`` name the application's first route: the page itself; ``href="#!"``
    # is also the placeholder link of many templates)
    return url if route.startswith("/") and route.strip("/") else base


EVENT_STREAM = "text/event-stream"


def is_event_stream(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` value names server-sent events."""
    return (content_type or "").lower().lstrip().startswith(EVENT_STREAM)
