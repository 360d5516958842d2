"""Content codings (gzip, deflate, br, zstd): undoing them for reading, injection and display."""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import io
import sys
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


BROTLI_STEP = 16  # input bytes per call where the binding cannot bound a call's output (below)


@functools.cache
def _google_brotli():
    """Google's brotli binding (``Decompressor.process``), None when only brotlipy is installed.
    brotlipy, installed beside it (pywb wants it), takes both its names, ``brotli`` and (once
    imported) ``_brotli``: Google's C module is then loaded from its own file. It is several times
    faster per call, and from 1.2 bounds each call's output."""
    import brotli

    if hasattr(getattr(brotli, "Decompressor", None), "process"):
        return brotli
    mod = sys.modules.get("_brotli")
    if mod is None or not hasattr(getattr(mod, "Decompressor", None), "process"):
        spec = importlib.machinery.PathFinder.find_spec("_brotli")
        if spec is None or spec.loader is None:
            return None
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except ImportError:
            return None
    return mod if hasattr(getattr(mod, "Decompressor", None), "process") else None


def _brotli_decompressor():
    """A brotli decompressor and whether it is Google's binding."""
    google = _google_brotli()
    if google is not None:
        return google.Decompressor(), True
    import brotli

    return brotli.Decompressor(), False


def _brotli_chunks(body: bytes):
    d, google = _brotli_decompressor()
    if google and hasattr(d, "can_accept_more_data"):
        # Brotli >= 1.2: each call's output is bounded (``output_buffer_limit``, to within one of
        # its blocks), so the whole input goes in at once and the output is drained a chunk at a time
        out = d.process(body, output_buffer_limit=CHUNK)
        while out:
            yield out
            if d.is_finished():
                return
            out = d.process(b"", output_buffer_limit=CHUNK)
        return
    # Older bindings bound no single call: the input goes in a little at a time, so what one call
    # can expand to stays small next to the limit (a meta-block holds at most 16 MiB, and takes some
    # bytes of input to say so: a call of BROTLI_STEP bytes yields a few of them at most).
    step = d.process if google else d.decompress
    for i in range(0, len(body), BROTLI_STEP):
        out = step(body[i:i + BROTLI_STEP])
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
