"""SHA-256 digests of files as the project writes them: ``sha256:<hex>``, read in chunks so a
large file (a model, a packed archive) never sits in memory whole."""

from __future__ import annotations

import hashlib
import os


def file_sha256(path: str | os.PathLike) -> str:
    """The hex SHA-256 of the file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_digest(path: str | os.PathLike) -> str:
    """``sha256:<hex>`` of the file's bytes (the form manifests and bundles cite)."""
    return "sha256:" + file_sha256(path)


__all__ = ["file_digest", "file_sha256"]
