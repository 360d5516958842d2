"""Content addressing and compression of payloads.

A blob is keyed by the SHA-256 (hex) of its uncompressed bytes and stored as a zstd frame with
a content checksum (``zstd``), or raw when zstd would not make it smaller (already-compressed
images, gzip bodies): raw storage costs nothing to read back on the replay hot path. A packed
archive may also hold ``zstd-delta`` blobs: a zstd frame compressed against another blob (its
``base``, never itself a delta) used as a raw-content dictionary.
"""

from __future__ import annotations

import hashlib
import threading

import zstandard

from .errors import ArchiveError

# Capture-time level: fast enough that compression is not what limits an import or a recording.
# `archive pack` recompresses at PACK_LEVEL for the copy people share.
ZSTD_LEVEL = 2
PACK_LEVEL = 19
# A single SQLite value is capped near 1 GB; stay well clear of it.
MAX_BLOB_SIZE = 900 * 1024 * 1024

_per_thread = threading.local()
_decompressor = zstandard.ZstdDecompressor()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    # A zstd compressor is not thread-safe: one per level and thread (imports compress on workers).
    compressors = getattr(_per_thread, "compressors", None)
    if compressors is None:
        compressors = _per_thread.compressors = {}
    if level not in compressors:
        compressors[level] = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
    return compressors[level]


def digest_of(data: bytes) -> str:
    """Hex SHA-256 of ``data``: the blob's key."""
    return hashlib.sha256(data).hexdigest()


def encode(data: bytes, level: int = ZSTD_LEVEL, fresh: bool = False) -> tuple[str, bytes]:
    """Return ``(codec, stored_bytes)`` for ``data``; ``fresh`` uses a private compressor (thread-safe)."""
    if len(data) > MAX_BLOB_SIZE:
        raise ArchiveError(f"payload of {len(data)} bytes exceeds the {MAX_BLOB_SIZE}-byte limit per blob")
    if len(data) < 64:
        return "raw", data
    comp = (zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
            if fresh else _compressor(level))
    packed = comp.compress(data)
    if len(packed) >= len(data):
        return "raw", data
    return "zstd", packed


def encode_many(items: list[bytes], level: int = ZSTD_LEVEL) -> list[tuple[str, bytes]]:
    """:func:`encode` for many payloads in one call, byte for byte the same result. zstd runs
    with Python's GIL released here (unlike ``compress``), so worker threads compress in parallel."""
    out: list[tuple[str, bytes] | None] = [None] * len(items)
    todo = []
    for i, data in enumerate(items):
        if len(data) > MAX_BLOB_SIZE:
            raise ArchiveError(f"payload of {len(data)} bytes exceeds the {MAX_BLOB_SIZE}-byte limit per blob")
        if len(data) < 64:
            out[i] = ("raw", data)
        else:
            todo.append(i)
    if todo:
        frames = _compressor(level).multi_compress_to_buffer([items[i] for i in todo], threads=1)
        for i, frame in zip(todo, frames):
            packed = frame.tobytes()
            out[i] = ("raw", items[i]) if len(packed) >= len(items[i]) else ("zstd", packed)
    return out


def encode_delta(data: bytes, base: bytes, level: int = PACK_LEVEL) -> bytes:
    """``data`` as a zstd frame compressed against ``base`` (a raw-content dictionary).

    Used by `archive pack` for a blob that resembles another one (the next version of a page,
    another weight of a font): only the differences cost bytes.
    """
    d = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return zstandard.ZstdCompressor(level=level, dict_data=d, write_checksum=True,
                                    write_content_size=True).compress(data)


def decode(codec: str, stored: bytes, size: int, base: bytes | None = None) -> bytes:
    """Inverse of :func:`encode` and :func:`encode_delta`; ``size`` bounds the output so a hostile
    frame cannot balloon. ``base`` is the uncompressed base blob of a ``zstd-delta`` blob."""
    if codec == "raw":
        return bytes(stored)
    if codec == "zstd":
        return _decompressor.decompress(stored, max_output_size=max(size, 1))
    if codec == "zstd-delta":
        if base is None:
            raise ArchiveError("a zstd-delta blob needs its base")
        d = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        return zstandard.ZstdDecompressor(dict_data=d).decompress(stored, max_output_size=max(size, 1))
    raise ArchiveError(f"unknown blob codec {codec!r}")
