"""Undoing a response's content coding in bounded memory, for the replay's answers.

The replay decodes a body only to rewrite or inject into it, with
:func:`webfreeze.archives.content.decode_content` (chunked, counted as it comes) under a tighter
limit, :data:`MAX_EXPANSION` (64 MiB, per request): a body that would expand past it is given up
on with a :class:`DecodeError` having held no more than one chunk of it. The answer is then the
body as archived, still coded, which the browser decodes (and bounds) itself.
"""

from __future__ import annotations

from webfreeze.archives.content import DecodeError, decode_content

MAX_EXPANSION = 64 * 1024 * 1024

__all__ = ["DecodeError", "MAX_EXPANSION", "decode_bounded"]


def decode_bounded(body: bytes, encoding: str, limit: int = MAX_EXPANSION) -> bytes:
    """``body`` with its content coding undone; :class:`DecodeError` when the coding is unknown or
    corrupt, or when the output would pass ``limit`` bytes (found out holding one chunk at a time)."""
    return decode_content(body, encoding, limit)
