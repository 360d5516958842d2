"""Content codings (gzip, deflate, br, zstd): undoing them for reading, injection and display."""

from __future__ import annotations

import io
import zlib

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.http import header_value

MAX_DECODED = 256 * 1024 * 1024
KEEP_BYTES = 8 * 1024 * 1024  # decoded output held while it is counted; a larger body is decoded twice
CHUNK = 256 * 1024


class DecodeError(WebfreezeError):
    pass


class DecodedTooLarge(DecodeError):
    """A body whose decoded form is beyond the limit (a compression bomb, or simply huge)."""


def content_encoding(headers) -> str:
    return header_value(headers, "content-encoding", "").strip().lower()


def _zlib_chunks(body: bytes, wbits: int):
    d = zlib.decompressobj(wbits)
    data = body
    while data:
        out = d.decompress(data, CHUNK)
        if out:
            yield out
        data = d.unconsumed_tail
        if d.eof:
            return
    while True:
        out = d.flush(CHUNK)
        if not out:
            return
        yield out


def _deflate_chunks(body: bytes):
    try:  # zlib-wrapped, as the standard says; raw deflate, as some servers send it
        zlib.decompressobj().decompress(body[:64], 1)
        wbits = zlib.MAX_WBITS
    except zlib.error:
        wbits = -zlib.MAX_WBITS
    yield from _zlib_chunks(body, wbits)


def _brotli_chunks(body: bytes):
    import brotli

    d = brotli.Decompressor()
    step = getattr(d, "process", None) or d.decompress  # (Google's Brotli; brotlipy)
    # Neither bounds the output of one call: the input goes in a little at a time, so what one call
    # can expand to stays small next to the limit (a brotli command copies at most ~16 MiB).
    for i in range(0, len(body), 16):
        out = step(body[i:i + 16])
        if out:
            yield out


def _zstd_chunks(body: bytes):
    import zstandard

    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body), read_across_frames=True) as reader:
        while True:
            out = reader.read(CHUNK)
            if not out:
                return
            yield out


def _chunks(body: bytes, enc: str, encoding: str):
    if enc in ("gzip", "x-gzip"):
        return _zlib_chunks(body, 16 + zlib.MAX_WBITS)
    if enc == "deflate":
        return _deflate_chunks(body)
    if enc == "br":
        return _brotli_chunks(body)
    if enc == "zstd":
        return _zstd_chunks(body)
    raise DecodeError(f"unknown content coding {encoding!r}")


def decode_content(body: bytes, encoding: str, limit: int = MAX_DECODED) -> bytes:
    """Undo one content coding; raise :class:`DecodeError` when it is corrupt or unknown, and
    :class:`DecodedTooLarge` when the output would pass ``limit`` bytes.

    An archive may come from elsewhere: a 2 KB record may hold a body whose coding expands to a
    gigabyte. The output is counted a chunk at a time and given up on as soon as the count passes
    ``limit``, having held no more than one chunk of it; a body whose output passes
    :data:`KEEP_BYTES` while being counted is decoded a second time once it is known to fit, so
    what is held at once is the decoded body, never a gigabyte of it."""
    enc = (encoding or "").strip().lower()
    if enc in ("", "identity"):
        return body
    kept: list[bytes] | None = []
    total = 0
    try:
        for out in _chunks(body, enc, encoding):
            total += len(out)
            if total > limit:
                raise DecodedTooLarge(f"{encoding} body expands beyond {limit} bytes")
            if kept is not None:
                kept.append(out)
                if total > KEEP_BYTES:
                    kept = None  # counted on, then decoded again once it is known to fit
        if kept is None:
            kept = list(_chunks(body, enc, encoding))
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"{encoding} body is corrupt ({exc})") from None
    return b"".join(kept)


def decode_for_display(body: bytes, headers) -> bytes:
    """Best effort: the decoded body, or the body as stored when it cannot be decoded."""
    try:
        return decode_content(body, content_encoding(headers))
    except DecodeError:
        return body
