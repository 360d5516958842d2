"""``archive verify``: SQLite's own integrity check, every index against its table, every blob
digest, and every reference to a blob; :func:`require_intact` refuses a damaged archive before an
export, a pack or a bundle reads it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

from webfreeze.common.http import header_value

from .bodykey import body_key, legacy_body_keys
from .errors import ArchiveError
from .store import Archive
from .urlkey import surt_key


@dataclass
class Problem:
    where: str  # "blob", "exchange 12", "page 3", "document tasks.json", "sqlite"
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class VerifyReport:
    blobs_checked: int = 0
    exchanges_checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def blob_problem(arc: Archive, row) -> str | None:
    """What is wrong with a ``blobs`` row (digest, size, codec, data, base) of ``arc``, or ``None``:
    it must decode, to its recorded size, to bytes whose SHA-256 is its digest."""
    try:
        data = arc.decode_blob(row)
    except Exception as exc:
        return f"cannot be decompressed ({exc})"
    if len(data) != row["size"]:
        return f"is {len(data)} bytes, index says {row['size']}"
    if hashlib.sha256(data).hexdigest() != row["digest"]:
        return "content does not match its SHA-256 digest"
    return None


def index_problems(arc: Archive) -> list[Problem]:
    """Each index of the archive read against its table: the rows (rowid and indexed columns) an
    index yields must be those a scan of the table yields. SQLite's ``integrity_check`` does the
    same; this says which index, so a report names the lookup that would go wrong."""
    out = []
    indexes = arc.conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type='index' "
                               "ORDER BY tbl_name, name").fetchall()
    for name, table in indexes:
        cols = [r[2] for r in arc.conn.execute(f'PRAGMA index_info("{name}")') if r[2] is not None]
        if not cols:
            continue  # (an index on an expression: integrity_check covers it)
        listed = ", ".join(f'"{c}"' for c in cols)
        try:
            via_index = arc.conn.execute(f'SELECT rowid, {listed} FROM "{table}" INDEXED BY "{name}" '
                                         f"ORDER BY {listed}").fetchall()
            via_table = arc.conn.execute(f'SELECT rowid, {listed} FROM "{table}" NOT INDEXED').fetchall()
        except sqlite3.DatabaseError as exc:
            out.append(Problem(f"index {name}", f"cannot be read ({exc})"))
            continue
        a, b = sorted(map(tuple, via_index), key=repr), sorted(map(tuple, via_table), key=repr)
        if a != b:
            missing = len(set(b) - set(a))
            stray = len(set(a) - set(b))
            out.append(Problem(f"index {name}", f"does not match table {table} ({missing} row(s) missing from it, "
                                                 f"{stray} entr{'y' if stray == 1 else 'ies'} for no row)"))
    return out


def require_intact(archive: str | os.PathLike, *, action: str = "nothing was written") -> None:
    """Refuse (:class:`ArchiveError`, one line naming the first damaged record) an archive that
    :func:`verify` finds damaged: an export, a pack or a bundle reads every blob it writes, and a
    blob whose bytes do not match their digest must not be written out under a fresh digest."""
    report = verify(archive)
    if not report.ok:
        more = len(report.problems) - 1
        raise ArchiveError(f"{archive}: damaged: {report.problems[0]}; {action}"
                           + (f" ({more} more problem(s): webfreeze archive verify {archive})" if more else ""))


def verify(archive: str | os.PathLike, progress: Callable[[int], None] | None = None) -> VerifyReport:
    """Check SQLite integrity, every blob's digest and size, and every reference to a blob of the
    archive at path ``archive``; ``progress`` is called with the bytes of each blob checked.

    Runs on one snapshot, so a recorder writing meanwhile cannot cause false alarms."""
    with Archive.open(archive) as arc, arc.snapshot():
        return _verify(arc, progress)


def _verify(arc: Archive, progress: Callable[[int], None] | None) -> VerifyReport:
    report = VerifyReport()
    # integrity_check, not quick_check: only the former reads every index entry against its row
    # (a flipped byte in an index page can hide a row from a lookup and pass quick_check)
    try:
        for (msg,) in arc.conn.execute("PRAGMA integrity_check"):
            if msg != "ok":
                report.problems.append(Problem("sqlite", msg))
        report.problems += index_problems(arc)
    except sqlite3.DatabaseError as exc:
        report.problems.append(Problem("sqlite", f"the file cannot be read ({exc})"))
        return report
    bad_blobs: dict[str, str] = {}
    for row in arc.conn.execute("SELECT digest, size, codec, data, base FROM blobs"):
        report.blobs_checked += 1
        problem = blob_problem(arc, row)
        if problem:
            bad_blobs[row["digest"]] = problem
        if progress:
            progress(row["size"])
    known = {d for (d,) in arc.conn.execute("SELECT digest FROM blobs")}

    def check_ref(where: str, label: str, digest: str | None) -> None:
        if digest is None:
            return
        if digest not in known:
            report.problems.append(Problem(where, f"{label} blob sha256:{digest} is missing"))
        elif digest in bad_blobs:
            report.problems.append(Problem(where, f"{label} blob sha256:{digest} {bad_blobs[digest]}"))

    referenced: set[str] = set()
    for row in arc.exchange_rows():
        report.exchanges_checked += 1
        where = f"exchange {row['id']} {row['method']} {row['url']}"
        check_ref(where, "payload", row["payload"])
        check_ref(where, "request body", row["req_body"])
        referenced.update(d for d in (row["payload"], row["req_body"]) if d)
        if row["surt"] != surt_key(row["url"]):
            report.problems.append(Problem(where, "SURT key does not match the URL"))
        try:
            req_headers = arc.row_headers(row, "req_headers")
            arc.row_headers(row, "resp_headers")
        except ArchiveError:
            report.problems.append(Problem(where, "a stored header list is corrupt"))
            continue
        if row["req_body"] and row["req_body"] in known and row["req_body"] not in bad_blobs:
            kind, blob = header_value(req_headers, "content-type"), arc.get_blob(row["req_body"])
            if body_key(kind, blob) != row["body_key"] and row["body_key"] not in legacy_body_keys(kind, blob):
                report.problems.append(Problem(where, "request body key does not match the body"))
        if row["payload"] in known and row["payload"] not in bad_blobs:
            size = arc.conn.execute("SELECT size FROM blobs WHERE digest=?", (row["payload"],)).fetchone()[0]
            if size != row["payload_size"]:
                report.problems.append(Problem(where, f"payload size {row['payload_size']} does not match blob ({size})"))
    for row in arc.page_rows():
        where = f"page {row['id']} {row['url']}"
        check_ref(where, "screenshot", row["screenshot"])
        check_ref(where, "DOM snapshot", row["dom"])
        referenced.update(d for d in (row["screenshot"], row["dom"]) if d)
    dictionary = arc.meta().get("header_dictionary")
    check_ref("metadata", "header dictionary", dictionary)
    referenced.add(dictionary)
    for row in arc.conn.execute("SELECT name, digest FROM documents"):
        check_ref(f"document {row['name']}", "content", row["digest"])
        referenced.add(row["digest"])
    # A damaged blob nothing points at still deserves a line (gc would remove it).
    for digest, what in sorted(bad_blobs.items()):
        if digest not in referenced:
            report.problems.append(Problem(f"unreferenced blob sha256:{digest}", what))
    return report
