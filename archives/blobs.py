"""Content addressing and compression of payloads.

A blob is keyed by the SHA-256 (hex) of its uncompressed bytes and stored as a zstd frame with
a content checksum, or raw when zstd would not make it smaller (already-compressed images,
gzip bodies): raw storage costs nothing to read back on the replay hot path.
"""

from __future__ import annotations

import hashlib

import zstandard

from .errors import ArchiveError

ZSTD_LEVEL = 9
# A single SQLite value is capped near 1 GB; stay well clear of it.
MAX_BLOB_SIZE = 900 * 1024 * 1024

_compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, write_content_size=True)
_decompressor = zstandard.ZstdDecompressor()


def digest_of(data: bytes) -> str:
    """Hex SHA-256 of ``data``: the blob's key."""
    return hashlib.sha256(data).hexdigest()


def encode(data: bytes) -> tuple[str, bytes]:
    """Return ``(codec, stored_bytes)`` for ``data``."""
    if len(data) > MAX_BLOB_SIZE:
        raise ArchiveError(f"payload of {len(data)} bytes exceeds the {MAX_BLOB_SIZE}-byte limit per blob")
    if len(data) < 64:
        return "raw", data
    packed = _compressor.compress(data)
    if len(packed) >= len(data):
        return "raw", data
    return "zstd", packed


def decode(codec: str, stored: bytes, size: int) -> bytes:
    """Inverse of :func:`encode`; ``size`` bounds the output so a hostile frame cannot balloon."""
    if codec == "raw":
        return bytes(stored)
    if codec == "zstd":
        return _decompressor.decompress(stored, max_output_size=max(size, 1))
    raise ArchiveError(f"unknown blob codec {codec!r}")
