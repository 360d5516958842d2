"""The archive format: content-addressed zstd blobs and a SQLite index, WARC/ARC/WACZ import and
export, verification and maintenance. Imports nothing else of webfreeze's stages but ``common``.

Reading::

    with Archive.open("site.wfz") as arc:
        for ex in arc.exchanges(prefix="http://example.com/", since="2024"):
            print(ex.captured_at, ex.status, ex.url, ex.response.header("content-type"), len(ex.body()))

Records (:class:`ExchangeRecord`, :class:`PageRecord`, :class:`DocumentRecord`) are typed; the
SQLite tables are this package's private business. Maintenance (:func:`info`, :func:`diff`,
:func:`merge`, :func:`gc`, :func:`pack`, :func:`export`, :func:`import_files`, and
``webfreeze.archives.verify.verify``, whose module has its name) takes archive paths.
"""

from importlib import import_module

from .errors import ArchiveError, ArchiveLocked, BadInput
from .publish import new_archive_atomically
from .records import DocumentRecord, ExchangeRecord, PageRecord, Request, Response
from .store import Archive, Exchange

__all__ = ["Archive", "ArchiveError", "ArchiveLocked", "BadInput", "DocumentRecord", "Exchange", "ExchangeRecord",
           "PageRecord", "Request", "Response", "archive_digest", "new_archive_atomically"]


def archive_digest(path) -> str:
    """``sha256:<hex>`` of an archive file's bytes: what run manifests and trajectories cite."""
    from .descriptors import file_sha256  # (read so as not to drop this process's SQLite locks on it)

    return "sha256:" + file_sha256(path)


# maintenance, imported on first use: name -> module
_MAINTENANCE = {"info": "maintenance", "storage": "maintenance", "diff": "maintenance", "merge": "maintenance", "gc": "maintenance",
                "sessions": "maintenance",
                "pack": "maintenance", "export": "warc_export", "import_files": "importer"}


def __getattr__(name):
    module = _MAINTENANCE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = sorted(["Archive", "ArchiveError", "ArchiveLocked", "BadInput", "DocumentRecord", "Exchange",
                  "ExchangeRecord", "PageRecord", "Request", "Response", "archive_digest",
                  "new_archive_atomically", *_MAINTENANCE])
