"""URL keys: the SURT form used for prefix lookups (computed by the `surt` package), and URLs
spelled from their parts (IPv6 literals keep their brackets)."""

from __future__ import annotations

import functools
import importlib
import sys
import types
from urllib.parse import urlsplit


class _Deferred(types.ModuleType):
    """A module imported on first use: stands in for ``tldextract`` while ``surt`` is imported.
    surt's ``handyurl`` imports tldextract at its top, and tldextract imports ``requests``: about
    0.15 s of every command's start, for public-suffix questions (``getPublicSuffix``) that the
    SURT form never asks."""

    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self.__name__), name)


def _import_surt():
    if "tldextract" in sys.modules:
        import surt
        return surt
    stand_in = sys.modules["tldextract"] = _Deferred("tldextract")
    try:
        import surt
    finally:  # (whoever imports tldextract later gets the real one)
        if sys.modules.get("tldextract") is stand_in:
            del sys.modules["tldextract"]
    return surt


_surt = _import_surt()

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@functools.lru_cache(maxsize=8192)  # an import asks again for the URLs of revisits and their originals
def surt_key(url: str) -> str:
    """SURT key of ``url`` (lower-cased host reversed, sorted query), as pywb and CDXJ use it. An
    IPv6 literal host keeps its brackets (``[::1]:8080)/x``): the surt package drops them, which
    would leave the port indistinguishable from the address."""
    try:
        key = _surt.surt(url)
    except Exception:  # surt rejects some non-HTTP URIs (urn:, dns:); keep them addressable
        return url.lower()
    if "[" in url[:16]:
        try:
            parts = urlsplit(url)
            host = parts.hostname
            port = parts.port
        except ValueError:
            return key
        if host and ":" in host and ")" in key:
            default = DEFAULT_PORTS.get(parts.scheme.lower())
            netloc = f"[{host}]" + (f":{port}" if port and port != default else "")
            return netloc + key[key.index(")"):]
    return key


def url_of(scheme: str, host: str, port: int | None, path: str) -> str:
    """``scheme://host[:port]path``, the port left out when it is the scheme's default, an IPv6
    literal host in brackets (mitmproxy's ``Request.url`` leaves them out: ``http://::1:8080/x``)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    default = DEFAULT_PORTS.get(scheme.lower())
    return f"{scheme}://{host}{'' if port is None or port == default else f':{port}'}{path}"


def host_of(url: str) -> str:
    """The host part of ``url`` (lower-case, no port), or '' for URIs without one."""
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
