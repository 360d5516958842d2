"""The archive format: content-addressed zstd blobs and a SQLite index, WARC/ARC/WACZ import and
export, verification and maintenance. Imports nothing else of webfreeze's stages."""

from .errors import ArchiveError, ArchiveLocked, BadInput
from .store import Archive, Exchange, new_archive_atomically

__all__ = ["Archive", "ArchiveError", "ArchiveLocked", "BadInput", "Exchange", "new_archive_atomically"]
