"""URL keys: the SURT form used for prefix lookups (computed by the `surt` package)."""

from __future__ import annotations

import functools

import surt as _surt


@functools.lru_cache(maxsize=8192)  # an import asks again for the URLs of revisits and their originals
def surt_key(url: str) -> str:
    """SURT key of ``url`` (lower-cased host reversed, sorted query), as pywb and CDXJ use it."""
    try:
        return _surt.surt(url)
    except Exception:  # surt rejects some non-HTTP URIs (urn:, dns:); keep them addressable
        return url.lower()


def host_of(url: str) -> str:
    """The host part of ``url`` (lower-case, no port), or '' for URIs without one."""
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
