"""Canonical JSON: the one spelling of a JSON value that identities and digests are computed over
(LLM cassette keys, history and suite digests, study cell identities, index cache keys). Keys
sorted, no spaces (``","`` and ``":"``), non-ASCII text kept as itself in UTF-8. Two equal values
get the same bytes on any machine, so a digest of them is a stable name; changing this spelling
changes every stored key and digest, so it never changes."""

from __future__ import annotations

import json
from typing import Any

_SEPARATORS = (",", ":")


def canonical_json(obj: Any, *, allow_nan: bool = True) -> str:
    """The canonical JSON text of ``obj``. ``allow_nan=False`` refuses NaN and the infinities with a
    ValueError (strict JSON, which an API request must be); by default they are spelled ``NaN``,
    ``Infinity`` as Python's json module reads and writes them, so a file that held them still
    has a digest."""
    return json.dumps(obj, sort_keys=True, separators=_SEPARATORS, ensure_ascii=False, allow_nan=allow_nan)


def canonical_bytes(obj: Any, *, allow_nan: bool = True) -> bytes:
    """:func:`canonical_json` of ``obj`` as UTF-8 bytes (what a digest hashes)."""
    return canonical_json(obj, allow_nan=allow_nan).encode("utf-8")


__all__ = ["canonical_bytes", "canonical_json"]
