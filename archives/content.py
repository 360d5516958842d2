"""Content codings (gzip, deflate, br, zstd): undoing them for reading, injection and display."""

from __future__ import annotations

import zlib

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.http import header_value

MAX_DECODED = 256 * 1024 * 1024


class DecodeError(WebfreezeError):
    pass


class DecodedTooLarge(DecodeError):
    """A body whose decoded form is beyond the limit (a compression bomb, or simply huge)."""


def content_encoding(headers) -> str:
    return header_value(headers, "content-encoding", "").strip().lower()


def decode_content(body: bytes, encoding: str, limit: int = MAX_DECODED) -> bytes:
    """Undo one content coding; raise :class:`DecodeError` when it is corrupt, unknown or too large."""
    enc = encoding.strip().lower()
    try:
        if enc in ("", "identity"):
            return body
        if enc in ("gzip", "x-gzip"):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(body, limit)
        elif enc == "deflate":
            try:
                d = zlib.decompressobj()
                out = d.decompress(body, limit)
            except zlib.error:
                d = zlib.decompressobj(-zlib.MAX_WBITS)
                out = d.decompress(body, limit)
        elif enc == "br":
            import brotli

            out = brotli.decompress(body)  # (no limit in the binding: its length is checked below)
        elif enc == "zstd":
            import zstandard

            out = zstandard.ZstdDecompressor().decompress(body, max_output_size=limit)
        else:
            raise DecodeError(f"unknown content coding {encoding!r}")
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"{encoding} body is corrupt ({exc})") from None
    if len(out) >= limit:
        raise DecodedTooLarge(f"{encoding} body expands beyond {limit} bytes")
    return out


def decode_for_display(body: bytes, headers) -> bytes:
    """Best effort: the decoded body, or the body as stored when it cannot be decoded."""
    try:
        return decode_content(body, content_encoding(headers))
    except DecodeError:
        return body
