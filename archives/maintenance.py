"""Reading and maintaining archives: info, listing, diff, merge and garbage collection."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .errors import ArchiveError
from .store import Archive, new_archive_atomically
from .urlkey import host_of


# ------------------------------------------------------------------------------------ info
def info(arc: Archive) -> dict:
    """Counts, sizes, dedup and compression ratios, hosts and capture time range."""
    q = arc.conn.execute
    n_ex, logical, first, last = q(
        "SELECT count(*), coalesce(sum(payload_size),0) + coalesce(sum(req_body_size),0), "
        "min(captured_at), max(captured_at) FROM exchanges"
    ).fetchone()
    n_blobs, unique, stored = q("SELECT count(*), coalesce(sum(size),0), coalesce(sum(stored_size),0) FROM blobs").fetchone()
    hosts = Counter()
    statuses = Counter()
    mimes = Counter()
    for url, status, mime in q("SELECT url, status, mime FROM exchanges"):
        hosts[host_of(url)] += 1
        statuses[str(status)] += 1
        mimes[mime or "unknown"] += 1
    file_bytes = sum(os.path.getsize(f"{arc.path}{s}") for s in ("", "-wal") if os.path.exists(f"{arc.path}{s}"))
    meta = arc.meta()
    return {
        "path": str(arc.path),
        "format_version": meta.get("format_version"),
        "creator": meta.get("creator"),
        "description": meta.get("description"),
        "license": meta.get("license"),
        "tool_version": meta.get("tool_version"),
        "created_at": meta.get("created_at"),
        "exchanges": n_ex,
        "pages": q("SELECT count(*) FROM pages").fetchone()[0],
        "documents": q("SELECT count(*) FROM documents").fetchone()[0],
        "sessions": q("SELECT count(*) FROM sessions").fetchone()[0],
        "blobs": n_blobs,
        "payload_bytes": logical,
        "unique_bytes": unique,
        "stored_blob_bytes": stored,
        "file_bytes": file_bytes,
        "dedup_ratio": round(logical / unique, 3) if unique else None,
        "compression_ratio": round(unique / stored, 3) if stored else None,
        "time_range": [first, last] if first else None,
        "hosts": dict(hosts.most_common()),
        "statuses": dict(sorted(statuses.items())),
        "mime_types": dict(mimes.most_common()),
    }


# ------------------------------------------------------------------------------------ ls
def list_exchanges(arc: Archive, *, host: str | None = None, prefix: str | None = None, mime: str | None = None,
                   status: int | None = None, method: str | None = None, since: str | None = None,
                   until: str | None = None, limit: int | None = None):
    """Exchange rows matching all given filters, in capture order."""
    from .timeutil import normalize_time
    from .urlkey import surt_key

    where, params = [], []
    if prefix:
        key = surt_key(prefix)
        where.append("surt >= ? AND surt < ?")
        params += [key, key + "\U0010ffff"]
    if mime:
        where.append("mime LIKE ?" if "*" in mime else "mime = ?")
        params.append(mime.replace("*", "%").lower())
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if method:
        where.append("method = ?")
        params.append(method.upper())
    if since:
        where.append("captured_at >= ?")
        params.append(normalize_time(since))
    if until:
        where.append("captured_at <= ?")
        params.append(normalize_time(until))
    sql = " AND ".join(where)
    count = 0
    for row in arc.exchanges(sql, tuple(params), order="captured_at, id"):
        if host and host_of(row["url"]) != host.lower():
            continue
        yield row
        count += 1
        if limit and count >= limit:
            return


# ------------------------------------------------------------------------------------ diff
@dataclass
class DiffEntry:
    change: str  # "added", "removed", "changed"
    method: str
    url: str
    body_key: str
    old: str | None
    new: str | None


def _latest_by_key(arc: Archive) -> dict[tuple[str, str, str], str]:
    latest: dict[tuple[str, str, str], str] = {}
    for method, url, bkey, payload in arc.conn.execute(
        "SELECT method, url, body_key, payload FROM exchanges ORDER BY captured_at, id"
    ):
        latest[(method, url, bkey)] = payload
    return latest


def diff(a: Archive, b: Archive) -> list[DiffEntry]:
    """What B adds, removes and changes relative to A, comparing the latest capture of each
    (method, URL, request body) by payload digest."""
    old, new = _latest_by_key(a), _latest_by_key(b)
    out = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: (k[1], k[0], k[2])):
        o, n = old.get(key), new.get(key)
        if o == n:
            continue
        change = "added" if o is None else "removed" if n is None else "changed"
        out.append(DiffEntry(change, key[0], key[1], key[2], o, n))
    return out


# ------------------------------------------------------------------------------------ merge
def merge(sources: list[str | os.PathLike], dest: str | os.PathLike) -> dict:
    """Merge archives into ``dest`` (created if missing), in one transaction.

    Blobs are deduplicated; sessions the destination already has are skipped with their
    exchanges and pages, so merging the same archive twice changes nothing. A document that
    exists in both with different contents is an error rather than a silent overwrite.
    """
    for s in sources:
        if not Path(s).exists():
            raise ArchiveError(f"{s}: no such archive")
        if Path(s).resolve() == Path(dest).resolve():
            raise ArchiveError(f"{s}: cannot merge an archive into itself")
        Archive.open(s).close()  # format check with a clear error
    if Path(dest).exists():
        with Archive.open(dest, write=True) as arc:
            return _merge_attached(arc, sources)
    with new_archive_atomically(dest) as arc:
        return _merge_attached(arc, sources)


def _merge_attached(arc: Archive, sources) -> dict:
    # SQLite cannot ATTACH inside a transaction: attach every source first, then copy in one.
    aliases = []
    try:
        for i, src in enumerate(sources):
            arc.conn.execute(f"ATTACH DATABASE ? AS src{i}", (f"file:{Path(src).resolve()}?mode=ro",))
            aliases.append((f"src{i}", src))
        with arc.transaction():
            return _merge_into(arc, aliases)
    finally:
        for alias, _ in aliases:
            arc.conn.execute(f"DETACH DATABASE {alias}")


def _merge_into(arc: Archive, aliases) -> dict:
    stats = Counter()
    q = arc.conn.execute
    for alias, src in aliases:
        new_sessions = [r[0] for r in q(
            f"SELECT id FROM {alias}.sessions WHERE id NOT IN (SELECT id FROM main.sessions)")]
        stats["sessions_skipped"] += q(f"SELECT count(*) FROM {alias}.sessions").fetchone()[0] - len(new_sessions)
        q("CREATE TEMP TABLE IF NOT EXISTS merge_sessions(id TEXT PRIMARY KEY)")
        q("DELETE FROM temp.merge_sessions")
        arc.conn.executemany("INSERT INTO temp.merge_sessions VALUES (?)", [(s,) for s in new_sessions])
        q(f"INSERT INTO main.sessions SELECT * FROM {alias}.sessions WHERE id IN temp.merge_sessions")
        before = arc.conn.total_changes
        q(f"INSERT OR IGNORE INTO main.blobs SELECT * FROM {alias}.blobs")
        stats["blobs_added"] += arc.conn.total_changes - before
        cols = ("session_id, captured_at, method, url, surt, body_key, status, reason, mime, http_version, kind, "
                "req_headers, req_body, req_body_size, resp_headers, payload, payload_size, extra")
        cur = q(f"INSERT INTO main.exchanges ({cols}) SELECT {cols} FROM {alias}.exchanges "
                "WHERE session_id IN temp.merge_sessions ORDER BY id")
        stats["exchanges_added"] += cur.rowcount
        pcols = "session_id, url, captured_at, title, screenshot, dom, extra"
        cur = q(f"INSERT INTO main.pages ({pcols}) SELECT {pcols} FROM {alias}.pages "
                "WHERE session_id IN temp.merge_sessions ORDER BY id")
        stats["pages_added"] += cur.rowcount
        q(f"INSERT OR IGNORE INTO main.digest_aliases SELECT * FROM {alias}.digest_aliases")
        for name, digest, size, updated in q(f"SELECT name, digest, size, updated_at FROM {alias}.documents").fetchall():
            mine = q("SELECT digest FROM main.documents WHERE name=?", (name,)).fetchone()
            if mine is None:
                q("INSERT INTO main.documents VALUES (?,?,?,?)", (name, digest, size, updated))
                stats["documents_added"] += 1
            elif mine[0] != digest:
                raise ArchiveError(f"{src}: document {name!r} differs from the one already in the destination")
    return dict(stats)


# ------------------------------------------------------------------------------------ gc
def gc(arc: Archive, *, dry_run: bool = False) -> dict:
    """Delete blobs nothing refers to, then compact the file."""
    q = arc.conn.execute
    unreferenced = """
        SELECT digest, stored_size FROM blobs WHERE digest NOT IN (
            SELECT payload FROM exchanges UNION SELECT req_body FROM exchanges WHERE req_body IS NOT NULL
            UNION SELECT screenshot FROM pages WHERE screenshot IS NOT NULL
            UNION SELECT dom FROM pages WHERE dom IS NOT NULL
            UNION SELECT digest FROM documents)"""
    rows = q(unreferenced).fetchall()
    freed = sum(r[1] for r in rows)
    before = os.path.getsize(arc.path)
    if not dry_run and rows:
        with arc.transaction():
            q("CREATE TEMP TABLE gc_doomed AS " + unreferenced)
            q("DELETE FROM blobs WHERE digest IN (SELECT digest FROM temp.gc_doomed)")
            q("DELETE FROM digest_aliases WHERE digest NOT IN (SELECT digest FROM blobs)")
            q("DROP TABLE temp.gc_doomed")
    if not dry_run:
        q("VACUUM")
        q("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"blobs_removed": len(rows), "blob_bytes_freed": freed, "file_bytes_before": before,
            "file_bytes_after": os.path.getsize(arc.path)}
