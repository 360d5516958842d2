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
    n_blobs, stored = q("SELECT count(*), coalesce(sum(stored_size),0) FROM blobs").fetchone()
    # dedup counts only what exchanges refer to (not page records, documents or the header dictionary)
    (unique,) = q("SELECT coalesce(sum(size),0) FROM blobs WHERE digest IN "
                  "(SELECT payload FROM exchanges UNION SELECT req_body FROM exchanges)").fetchone()
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
        "compression_ratio": round(q("SELECT coalesce(sum(size),0) FROM blobs").fetchone()[0] / stored, 3)
        if stored else None,
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
        req_h, resp_h = _header_transcoder(arc, alias)
        cols = ("session_id, captured_at, method, url, surt, body_key, status, reason, mime, http_version, kind, "
                "req_headers, req_body, req_body_size, resp_headers, payload, payload_size, extra")
        select = cols.replace("req_headers,", f"{req_h},").replace("resp_headers,", f"{resp_h},")
        cur = q(f"INSERT INTO main.exchanges ({cols}) SELECT {select} FROM {alias}.exchanges "
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


def _header_transcoder(arc: Archive, alias: str) -> tuple[str, str]:
    """SQL expressions that turn a source's stored header lists into the destination's encoding."""
    import json

    import zstandard

    from . import blobs

    src_dict = json.loads(arc.conn.execute(
        f"SELECT value FROM {alias}.meta WHERE key='header_dictionary'").fetchone()[0])
    if src_dict == arc.meta().get("header_dictionary"):
        return "req_headers", "resp_headers"
    row = arc.conn.execute(f"SELECT codec, data, size FROM {alias}.blobs WHERE digest=?", (src_dict,)).fetchone()
    if row is None:
        raise ArchiveError(f"{alias}: the source's header dictionary is missing")
    dictionary = zstandard.ZstdCompressionDict(blobs.decode(*row), dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    source = zstandard.ZstdDecompressor(dict_data=dictionary)

    def transcode(value):
        if value is None:
            return None
        return arc.encode_headers(json.loads(source.decompress(value, max_output_size=4 << 20)))

    arc.conn.create_function(f"wf_headers_{alias}", 1, transcode, deterministic=True)
    return f"wf_headers_{alias}(req_headers)", f"wf_headers_{alias}(resp_headers)"


# ------------------------------------------------------------------------------------ gc
def gc(arc: Archive, *, dry_run: bool = False) -> dict:
    """Delete blobs nothing refers to, then compact the file."""
    q = arc.conn.execute
    unreferenced = """
        SELECT digest, stored_size FROM blobs WHERE digest NOT IN (
            SELECT payload FROM exchanges UNION SELECT req_body FROM exchanges WHERE req_body IS NOT NULL
            UNION SELECT screenshot FROM pages WHERE screenshot IS NOT NULL
            UNION SELECT dom FROM pages WHERE dom IS NOT NULL
            UNION SELECT digest FROM documents
            UNION SELECT json_extract(value, '$') FROM meta WHERE key = 'header_dictionary')"""
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


# ------------------------------------------------------------------------------------ pack
def pack(archive_path: str | os.PathLike, out: str | os.PathLike | None = None, *, level: int | None = None,
         progress=None) -> dict:
    """Recompress every blob at a high zstd level and compact the file: the form to share.

    With ``out``, the original is left untouched and the packed copy appears at ``out`` only when
    complete. Content and digests never change, only how the bytes are stored.
    """
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from . import blobs

    level = level or blobs.PACK_LEVEL
    src = Path(archive_path)
    if out is not None:
        dest = Path(out)
        if dest.exists():
            raise ArchiveError(f"{dest}: already exists")
        if not dest.parent.is_dir():
            raise ArchiveError(f"{dest.parent}: no such directory")
        with Archive.open(src):
            pass  # format check with a clear error
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
        os.close(fd)
        os.unlink(tmp_name)
        try:
            with Archive.open(src) as arc:
                arc.conn.execute("VACUUM INTO ?", (tmp_name,))
            stats = _pack_in_place(Path(tmp_name), level, progress, ThreadPoolExecutor, blobs)
            os.replace(tmp_name, dest)
        except BaseException:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(tmp_name + suffix):
                    os.unlink(tmp_name + suffix)
            raise
        stats["file_bytes_before"] = os.path.getsize(src)
        return stats
    return _pack_in_place(src, level, progress, ThreadPoolExecutor, blobs)


def _pack_in_place(path: Path, level: int, progress, executor_cls, blobs) -> dict:
    before = os.path.getsize(path)
    changed = 0

    def recode(row):
        digest, codec, data, size = row
        raw = blobs.decode(codec, data, size)
        new_codec, new_data = blobs.encode(raw, level=level, fresh=True)
        return digest, new_codec, new_data, len(data)

    with Archive.open(path, write=True) as arc:
        digests = [r[0] for r in arc.conn.execute("SELECT digest FROM blobs ORDER BY rowid")]
        with arc.transaction(), executor_cls(max_workers=os.cpu_count() or 1) as pool:
            for start in range(0, len(digests), 64):
                batch = arc.conn.execute(
                    f"SELECT digest, codec, data, size FROM blobs WHERE digest IN ({','.join('?' * len(digests[start:start + 64]))})",
                    digests[start:start + 64]).fetchall()
                for digest, codec, data, old_len in pool.map(recode, [tuple(r) for r in batch]):
                    if len(data) < old_len:
                        arc.conn.execute("UPDATE blobs SET codec=?, data=?, stored_size=? WHERE digest=?",
                                         (codec, data, len(data), digest))
                        changed += 1
                    if progress:
                        progress(1)
        arc.conn.execute("VACUUM")
        arc.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"blobs": len(digests), "blobs_recompressed": changed, "file_bytes_before": before,
            "file_bytes_after": os.path.getsize(path)}
