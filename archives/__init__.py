"""The archive format: content-addressed zstd blobs and a SQLite index, WARC/ARC/WACZ import and
export, verification and maintenance. Imports nothing else of webfreeze's stages."""

from .errors import ArchiveError, ArchiveLocked, BadInput
from .store import Archive, Exchange, new_archive_atomically


def archive_digest(path) -> str:
    """``sha256:<hex>`` of an archive file's bytes: what run manifests and trajectories cite."""
    from .store import file_sha256  # (read so as not to drop this process's SQLite locks on it)

    return "sha256:" + file_sha256(path)


__all__ = ["Archive", "ArchiveError", "ArchiveLocked", "BadInput", "Exchange", "archive_digest",
           "new_archive_atomically"]
