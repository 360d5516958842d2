"""Undoing a response's content coding in bounded memory, for the replay's answers.

An archive comes from elsewhere: a 2 KB record may hold a body whose gzip coding expands to a
gigabyte. The replay decodes a body only to rewrite or inject into it, and does it here, in
chunks: the output is counted as it comes, and a body that would expand past
:data:`MAX_EXPANSION` (64 MiB, per request) is given up on with a :class:`DecodeError` as soon as
the count passes it, having held no more than one chunk of it. The answer is then the body as
archived, still coded, which the browser decodes (and bounds) itself.

Small bodies (most pages) are decoded in one pass; a body whose output passes
:data:`KEEP_BYTES` while it is being counted is decoded a second time once it is known to fit,
so what is held at once is the decoded body, never a gigabyte of it.
"""

from __future__ import annotations

import io
import zlib

from webfreeze.archives.content import DecodeError

MAX_EXPANSION = 64 * 1024 * 1024
KEEP_BYTES = 8 * 1024 * 1024
CHUNK = 256 * 1024

__all__ = ["DecodeError", "MAX_EXPANSION", "decode_bounded"]


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
        out = d.flush(CHUNK) if hasattr(d, "flush") else b""
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


def _chunks(body: bytes, enc: str):
    if enc in ("gzip", "x-gzip"):
        return _zlib_chunks(body, 16 + zlib.MAX_WBITS)
    if enc == "deflate":
        return _deflate_chunks(body)
    if enc == "br":
        return _brotli_chunks(body)
    if enc == "zstd":
        return _zstd_chunks(body)
    raise DecodeError(f"unknown content coding {enc!r}")


def decode_bounded(body: bytes, encoding: str, limit: int = MAX_EXPANSION) -> bytes:
    """``body`` with its content coding undone; :class:`DecodeError` when the coding is unknown or
    corrupt, or when the output would pass ``limit`` bytes (found out holding one chunk at a time)."""
    enc = (encoding or "").strip().lower()
    if enc in ("", "identity"):
        return body
    kept: list[bytes] | None = []
    total = 0
    try:
        for out in _chunks(body, enc):
            total += len(out)
            if total > limit:
                raise DecodeError(f"{encoding} body expands beyond {limit} bytes")
            if kept is not None:
                kept.append(out)
                if total > KEEP_BYTES:
                    kept = None  # counted on, then decoded again once it is known to fit
        if kept is None:
            kept = list(_chunks(body, enc))
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"{encoding} body is corrupt ({exc})") from None
    return b"".join(kept)
