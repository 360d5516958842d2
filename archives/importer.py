"""``archive import``: bring WARC, ARC, WACZ and HAR files into an archive, atomically.

All sources of one call land in a single transaction (or, for a new archive, in a file that is
renamed into place at the end): the import fails as a whole or lands as a whole. Each source file
becomes one capture session whose id is derived from the file's SHA-256, so importing the same
file twice is recognised and skipped.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import zlib
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from . import fast_import
from .descriptors import file_sha256
from .errors import BadInput
from .har_import import import_har, looks_like_har
from .publish import new_archive_atomically
from .store import Archive
from .wacz import open_checked, read_pages, warc_members
from .warc_import import ImportStats, WarcImporter

Progress = Callable[[int], None]


@dataclass
class SourceResult:
    source: str
    kind: str
    session_id: str
    skipped: bool = False
    stats: ImportStats = field(default_factory=ImportStats)
    pages: int = 0


def is_whole_file_gzip(path: Path, scan_limit: int = 64 << 20) -> bool:
    """True when a gzip file is one member holding many records (``gzip file.warc``).

    Per-record gzip (the WARC norm, read member by member by warcio, which tolerates a record's
    slack inside its own member) ends its first member after the first record, long before the end
    of the file; a file compressed as a whole does not. A first member larger than ``scan_limit``
    is streamed as a whole too.
    """
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return False
        fh.seek(0)
        d = zlib.decompressobj(31)
        produced = 0
        while not d.eof:
            chunk = fh.read(1 << 16)
            if not chunk:
                return False  # truncated: the importer reports it
            try:
                produced += len(d.decompress(chunk))
            except zlib.error:
                return False  # corrupt: the importer reports it
            if produced > scan_limit:
                return True
        return not (d.unused_data + fh.read(1))


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def sniff(path: Path) -> str:
    """Tell ``warc``, ``arc``, ``wacz`` or ``har`` from a file's first bytes; raise BadInput otherwise."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    if head.startswith(b"PK\x03\x04"):
        return "wacz"
    if head.startswith(b"\x1f\x8b"):
        try:
            with gzip.open(path, "rb") as gz:
                head = gz.read(64)
        except (OSError, EOFError, zlib.error):
            raise BadInput(f"{path}: corrupt or truncated gzip data") from None
    stripped = head.lstrip(b"\r\n")
    if stripped.startswith(b"WARC/"):
        return "warc"
    if stripped.startswith(b"filedesc:"):
        return "arc"
    if not head:
        raise BadInput(f"{path}: empty file")
    if looks_like_har(head):
        return "har"
    raise BadInput(f"{path}: not a WARC, ARC, WACZ or HAR file")


def import_files(archive_path: str | os.PathLike, sources: list[str | os.PathLike], *,
                 progress: Progress | None = None, create_meta: dict | None = None) -> list[SourceResult]:
    """Import ``sources`` into the archive at ``archive_path`` (created if missing)."""
    paths = [Path(s) for s in sources]
    kinds = []
    for p in paths:
        if not p.exists():
            raise BadInput(f"{p}: no such file")
        kinds.append(sniff(p))
    target = Path(archive_path)
    # The files' digests (their session ids) are computed on worker threads while the archive opens,
    # and the first file, when it is a per-record gzip WARC, starts inflating meanwhile too.
    digests = [fast_import.workers().submit(file_sha256, p) for p in paths]
    first = _prefetch(paths[0], kinds[0]) if paths else None
    try:
        if target.exists():
            with Archive.open(target, write=True) as arc:
                with arc.transaction():
                    return _import_all(arc, paths, kinds, digests, progress, first)
        with new_archive_atomically(target, **(create_meta or {})) as arc:
            with arc.transaction():
                return _import_all(arc, paths, kinds, digests, progress, first)
    finally:
        for d in digests:
            d.cancel()
        if first is not None:
            first.close()


def _prefetch(path: Path, kind: str) -> fast_import.Prefetch | None:
    if kind != "warc" or not _is_gzip(path) or is_whole_file_gzip(path):
        return None
    return fast_import.prefetch(path)


def _import_all(arc: Archive, paths: list[Path], kinds: list[str], digests: list[Future],
                progress: Progress | None, first: fast_import.Prefetch | None = None) -> list[SourceResult]:
    results = []
    importers: list[tuple[SourceResult, WarcImporter]] = []
    for i, (p, kind, digest) in enumerate(zip(paths, kinds, digests)):
        try:
            result, parts = _import_one(arc, p, kind, digest.result(), progress, first if i == 0 else None)
        except BadInput as exc:
            raise BadInput(f"{p}: {exc}") from None
        except MemoryError:
            raise BadInput(f"{p}: a record is too large to import") from None
        results.append(result)
        importers.extend((result, imp) for imp in parts)
    # Revisits may point at originals in any file of this import: retry until nothing moves.
    while any([imp.retry_revisits() for _, imp in importers]):
        pass
    for result, imp in importers:
        imp.finish()
        _merge_stats(result.stats, imp.stats)
    return results


def _import_one(arc: Archive, path: Path, kind: str, digest: str, progress: Progress | None,
                prefetched: fast_import.Prefetch | None = None) -> tuple[SourceResult, list[WarcImporter]]:
    sid = "i" + digest[:16]
    if arc.session(sid) is not None:
        if prefetched is not None:
            prefetched.close()  # what it inflated ahead is of no use
        if progress:
            progress(path.stat().st_size)
        return SourceResult(str(path), kind, sid, skipped=True), []
    arc.new_session("import", source=path.name, tool=f"{kind} import", session_id=sid)
    result = SourceResult(str(path), kind, sid)
    if kind == "wacz":
        return result, _import_wacz(arc, path, sid, result, progress)
    if kind == "har":
        result.stats, result.pages, info = import_har(arc, path, sid)
        arc.end_session(sid, {"har": info})
        if progress:
            progress(path.stat().st_size)
        return result, []
    whole_gzip = prefetched is None and is_whole_file_gzip(path)
    importer = None
    if kind == "warc" and not whole_gzip and fast_import.available() and not os.environ.get("WEBFREEZE_NO_FASTWARC"):
        try:
            importer = fast_import.import_fast(arc, path, sid, gzipped=prefetched is not None or _is_gzip(path),
                                               on_progress=progress, prefetched=prefetched)
        except fast_import.Fallback:
            importer = None  # nothing of it was kept; warcio reads the file and gives the verdict
    if importer is None:
        importer = WarcImporter(arc, sid, path.name, arc_file=kind == "arc")
        with open(path, "rb") as fh:
            importer.run(fh, progress, whole_gzip=whole_gzip)
    arc.end_session(sid, {"warcinfo": importer.warcinfo})
    return result, [importer]


def _import_wacz(arc: Archive, path: Path, sid: str, result: SourceResult,
                 progress: Progress | None) -> list[WarcImporter]:
    zf, package = open_checked(str(path))
    importers = []
    with zf:
        members = warc_members(package)
        if not members:
            raise BadInput("the WACZ holds no WARC files under archive/")
        infos = []
        for name in members:
            importer = WarcImporter(arc, sid, f"{path.name}#{name}", arc_file=name.lower().endswith((".arc", ".arc.gz")))
            with zf.open(name) as fh:
                try:
                    importer.run(fh)
                except BadInput as exc:  # (offsets in the message are of this member)
                    raise BadInput(f"{name}: {exc}") from None
            importers.append(importer)
            infos.extend(importer.warcinfo)
        for entry in read_pages(zf, package):
            ts = entry.get("ts")
            if not ts:
                continue
            arc.add_page(session_id=sid, url=entry["url"], captured_at=str(ts), title=entry.get("title") or "",
                         extra={"wacz_page_id": entry["id"]} if entry.get("id") else None)
            result.pages += 1
        arc.end_session(sid, {"warcinfo": infos, "wacz": {k: package.get(k) for k in ("title", "software", "created")}})
    if progress:
        progress(path.stat().st_size)
    return importers


def _merge_stats(total: ImportStats, part: ImportStats) -> None:
    for f in dataclasses.fields(ImportStats):
        mine, theirs = getattr(total, f.name), getattr(part, f.name)
        if isinstance(mine, dict):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        elif isinstance(mine, list):
            mine.extend(theirs)
        else:
            setattr(total, f.name, mine + theirs)
