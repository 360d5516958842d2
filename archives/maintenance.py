"""Reading and maintaining archives: info, diff, merge, garbage collection and packing.

One calling convention: every function here (and :func:`~webfreeze.archives.verify.verify`,
:func:`~webfreeze.archives.warc_export.export`, :func:`~webfreeze.archives.importer.import_files`)
takes archive *paths* and opens, locks and closes what it needs itself, so each ``archive``
command of the CLI is one call. To read an archive you have open, use its typed records
(:meth:`Archive.exchanges`, :meth:`Archive.pages`, :meth:`Archive.documents`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from webfreeze.common.files import sync_dir

from . import blobs
from .errors import ArchiveError
from .publish import _remove_db_files, new_archive_atomically
from .store import Archive, check_new_archive, headers_json, sqlite_uri
from .urlkey import host_of
from .verify import blob_problem, require_intact


# ------------------------------------------------------------------------------------ info
def info(archive: str | os.PathLike) -> dict:
    """Counts, sizes, dedup and compression ratios, hosts and capture time range."""
    with Archive.open(archive) as arc, arc.snapshot():
        return _info(arc)


def _info(arc: Archive) -> dict:
    q = arc.conn.execute
    n_ex, logical, first, last = q(
        "SELECT count(*), coalesce(sum(payload_size),0) + coalesce(sum(req_body_size),0), "
        "min(captured_at), max(captured_at) FROM exchanges"
    ).fetchone()
    n_blobs, raw, stored = q("SELECT count(*), coalesce(sum(size),0), coalesce(sum(stored_size),0) FROM blobs").fetchone()
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
        "blob_bytes": raw,  # every blob (payloads, page screenshots and DOMs, documents), before compression
        "stored_blob_bytes": stored,
        "file_bytes": file_bytes,
        "dedup_ratio": round(logical / unique, 3) if unique else None,
        "compression_ratio": round(raw / stored, 3) if stored else None,
        "time_range": [first, last] if first else None,
        "hosts": dict(hosts.most_common()),
        "statuses": dict(sorted(statuses.items())),
        "mime_types": dict(mimes.most_common()),
        "failed_pages": _failed_pages(arc),
        "incomplete_pages": _incomplete_pages(arc),
    }


def storage(archive: str | os.PathLike) -> dict:
    """Where an archive's bytes go, for people tuning compression: the file's pages (in use and
    free), blobs uncompressed and stored, payload bytes referenced, stored header bytes, page
    screenshots' bytes and, where SQLite was built with the ``dbstat`` table, bytes per table."""
    import sqlite3

    with Archive.open(archive) as arc, arc.snapshot():
        q = lambda sql: arc.conn.execute(sql).fetchone()  # noqa: E731
        page_size, page_count, free = q("PRAGMA page_size")[0], q("PRAGMA page_count")[0], q("PRAGMA freelist_count")[0]
        blob_row = q("SELECT count(*), coalesce(sum(size),0), coalesce(sum(stored_size),0) FROM blobs")
        ex = q("SELECT count(*), coalesce(sum(length(resp_headers)),0), coalesce(sum(length(req_headers)),0), "
               "coalesce(sum(payload_size),0) FROM exchanges")
        shots = q("SELECT coalesce(sum(b.size), 0), coalesce(sum(b.stored_size), 0) FROM blobs b WHERE b.digest IN "
                  "(SELECT screenshot FROM pages)")
        out = {
            "file_bytes": page_size * page_count,
            "free_pages_bytes": page_size * free,
            "blobs": blob_row[0],
            "blob_bytes_uncompressed": blob_row[1],
            "blob_bytes_stored": blob_row[2],
            "exchanges": ex[0],
            "payload_bytes_referenced": ex[3],
            "resp_header_bytes_stored": ex[1],
            "req_header_bytes_stored": ex[2],
            "screenshot_bytes": shots[0],
            "screenshot_bytes_stored": shots[1],
        }
        try:  # per-table bytes, where SQLite was built with the dbstat table
            out["bytes_by_table"] = {name: n for name, n in arc.conn.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")}
        except sqlite3.Error:
            pass
        return out


# Written by `record crawl --recheck`: when it checked every page record again, and what each page
# still missed then ("incomplete": [[url, [missing, ...]], ...]). The page records keep what the
# crawl saw at capture time; for the pages recorded before it, this is what holds now.
RECHECK_DOCUMENT = "checks/recheck.json"


def _last_recheck(arc: Archive) -> tuple[str, list] | None:
    try:
        doc = arc.get_document(RECHECK_DOCUMENT)
    except Exception:  # (not there, or not JSON: no recheck to go by)
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("at"), str) or not isinstance(doc.get("incomplete"), list):
        return None
    return doc["at"], [e for e in doc["incomplete"] if isinstance(e, list) and len(e) == 2]


def _incomplete_pages(arc: Archive) -> list[dict]:
    """Pages recorded whose crawl check still missed requests (``extra.complete`` false): their URL
    and what they missed; for the pages recorded before the last ``--recheck``, what it found
    (:data:`RECHECK_DOCUMENT`) instead."""
    out = []
    rechecked = _last_recheck(arc)
    since = ""
    if rechecked is not None:
        since = rechecked[0]
        out = [{"url": str(url), "missing": [str(m) for m in missing or []]} for url, missing in rechecked[1]]
    for url, captured_at, raw in arc.conn.execute(
            "SELECT url, captured_at, extra FROM pages WHERE extra LIKE '%\"complete\": false%' "
            "OR extra LIKE '%\"complete\":false%' ORDER BY id"):
        if since and captured_at <= since:
            continue  # (the recheck's verdict holds for it)
        try:
            extra = json.loads(raw) if raw else {}
        except ValueError:
            continue
        if isinstance(extra, dict) and extra.get("complete") is False:
            out.append({"url": url, "missing": [str(m) for m in extra.get("missing") or []]})
    return out


def _failed_pages(arc: Archive) -> list[dict]:
    """Pages a crawl visited but could not record (a network error, a 4xx/5xx answer), as its state
    documents (``crawls/*.json``, key ``failed``) list them."""
    out = []
    for name in arc.document_names():
        if not name.startswith("crawls/"):
            continue
        try:
            state = arc.get_document(name)
        except Exception:  # a document that is not JSON is not a crawl's state
            continue
        for entry in (state.get("failed") or []) if isinstance(state, dict) else []:
            if isinstance(entry, list) and len(entry) == 2:
                out.append({"url": str(entry[0]), "why": str(entry[1]), "crawl": name})
    return out


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


def diff(a: str | os.PathLike, b: str | os.PathLike) -> list[DiffEntry]:
    """What archive B adds, removes and changes relative to archive A, comparing the latest capture
    of each (method, URL, request body) by payload digest."""
    with Archive.open(a) as arc_a, Archive.open(b) as arc_b:
        old, new = _latest_by_key(arc_a), _latest_by_key(arc_b)
    out = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: (k[1], k[0], k[2])):
        o, n = old.get(key), new.get(key)
        if o == n:
            continue
        change = "added" if o is None else "removed" if n is None else "changed"
        out.append(DiffEntry(change, key[0], key[1], key[2], o, n))
    return out


# ------------------------------------------------------------------------------------ merge
def merge(sources: list[str | os.PathLike], dest: str | os.PathLike, *, skip_sessions=()) -> dict:
    """Merge archives into ``dest`` (created if missing, with the first source's metadata), in one
    transaction.

    Blobs are deduplicated; sessions the destination already has are skipped with their
    exchanges and pages, so merging the same archive twice changes nothing. A document that
    exists in both with different contents is an error rather than a silent overwrite. Every blob
    the destination does not have yet is decoded and its digest checked before it is copied: a
    damaged one stops the merge, which then changes nothing.

    ``skip_sessions`` (ids, as :func:`sessions` lists them) are left out with their exchanges,
    pages and the documents named after them (their WebSocket conversations, a recorded session's
    trajectory and DOM snapshots); leaving out a crawl's session leaves out the crawl resume states
    of its archive too (a crawl's state spans its sessions: the next crawl starts afresh). Then
    the blobs nothing refers to are removed and the file compacted (:func:`gc`). A live run's
    episode session cannot be left out (the run's index of episodes names it).
    """
    for s in sources:
        if not Path(s).exists():
            raise ArchiveError(f"{s}: no such archive")
        if Path(dest).exists() and Path(s).resolve() == Path(dest).resolve():
            raise ArchiveError(f"{s}: cannot merge an archive into itself")
    skip = set(skip_sessions)
    opened = [Archive.open(s) for s in sources]
    try:
        _check_skipped(opened, skip)
        if Path(dest).exists():
            with Archive.open(dest, write=True) as arc:
                held = sorted(sid for sid in skip if arc.session(sid) is not None)
                if held:
                    raise ArchiveError(f"{dest} already holds session {held[0]}: merging cannot take it out; "
                                       "merge into a new archive")
                stats = _merge_attached(arc, opened, skip)
        else:
            first = opened[0].meta()
            seed = {k: first.get(k) or "" for k in ("creator", "description", "license")}
            with new_archive_atomically(dest, replay_rules=first.get("replay_rules") or {}, **seed) as arc:
                stats = _merge_attached(arc, opened, skip)
    finally:
        for src in opened:
            src.close()
    if skip:
        stats["blobs_removed"] = gc(dest)["blobs_removed"]
    return stats


def _check_skipped(sources: list[Archive], skip: set) -> None:
    """Every session to leave out is in a source, and none is a live run's episode."""
    found = {}
    for src in sources:
        for sid in skip:
            row = src.session(sid)
            if row is not None:
                found[sid] = row["kind"]
    missing = sorted(skip - set(found))
    if missing:
        raise ArchiveError(f"no session {missing[0]} in {', '.join(str(s.path) for s in sources)} "
                           "('webfreeze archive sessions ARCHIVE' lists them)")
    live = sorted(sid for sid, kind in found.items() if kind == "live")
    if live:
        raise ArchiveError(f"session {live[0]} is a live run's episode: the run's index of episodes names it, so it "
                           "cannot be left out")


def _session_documents(name: str, skip: set) -> bool:
    """Whether the document ``name`` belongs to one of the sessions ``skip``."""
    parts = name.split("/")
    return len(parts) > 1 and (parts[1] in skip or parts[1].removesuffix(".json") in skip) and \
        parts[0] in ("websocket", "trajectories", "dom-snapshots")


def sessions(archive: str | os.PathLike) -> list[dict]:
    """The archive's capture sessions, oldest first: id, kind, source, tool, started_at, ended_at,
    and how many exchanges and pages each holds."""
    with Archive.open(archive) as arc, arc.snapshot():
        q = arc.conn.execute
        counts = {sid: n for sid, n in q("SELECT session_id, count(*) FROM exchanges GROUP BY session_id")}
        pages = {sid: n for sid, n in q("SELECT session_id, count(*) FROM pages GROUP BY session_id")}
        return [{"id": r["id"], "kind": r["kind"], "source": r["source"], "tool": r["tool"],
                 "started_at": r["started_at"], "ended_at": r["ended_at"],
                 "exchanges": counts.get(r["id"], 0), "pages": pages.get(r["id"], 0)}
                for r in q("SELECT * FROM sessions ORDER BY started_at, id")]


def _merge_attached(arc: Archive, sources: list[Archive], skip: frozenset | set = frozenset()) -> dict:
    # SQLite cannot ATTACH inside a transaction: attach every source first, then copy in one.
    aliases = []
    try:
        for i, src in enumerate(sources):
            arc.conn.execute(f"ATTACH DATABASE ? AS src{i}", (sqlite_uri(src.path, mode="ro"),))
            aliases.append((f"src{i}", src))
        with arc.transaction():
            return _merge_into(arc, aliases, skip)
    finally:
        for alias, _ in aliases:
            arc.conn.execute(f"DETACH DATABASE {alias}")


_COPY_COLUMNS = ("session_id, captured_at, method, url, surt, body_key, status, reason, mime, http_version, kind, "
                 "req_headers, req_body, req_body_size, resp_headers, payload, payload_size, extra")


def _merge_into(arc: Archive, aliases: list[tuple[str, Archive]], skip: frozenset | set = frozenset()) -> dict:
    stats = Counter()
    q = arc.conn.execute
    for alias, src in aliases:
        new_sessions = [r[0] for r in q(
            f"SELECT id FROM {alias}.sessions WHERE id NOT IN (SELECT id FROM main.sessions)")]
        left_out = [sid for sid in new_sessions if sid in skip]
        new_sessions = [sid for sid in new_sessions if sid not in skip]
        crawl_left_out = any(src.session(sid)["kind"] == "crawl" for sid in left_out)
        if left_out:
            stats["sessions_left_out"] += len(left_out)
        stats["sessions_skipped"] += q(f"SELECT count(*) FROM {alias}.sessions").fetchone()[0] - len(new_sessions) \
            - len(left_out)
        q("CREATE TEMP TABLE IF NOT EXISTS merge_sessions(id TEXT PRIMARY KEY)")
        q("DELETE FROM temp.merge_sessions")
        arc.conn.executemany("INSERT INTO temp.merge_sessions VALUES (?)", [(s,) for s in new_sessions])
        q(f"INSERT INTO main.sessions SELECT * FROM {alias}.sessions WHERE id IN temp.merge_sessions")
        # Every blob coming in is checked first: a damaged one would otherwise spread unnoticed.
        for row in q(f"SELECT digest, size, codec, data, base FROM {alias}.blobs "
                     "WHERE digest NOT IN (SELECT digest FROM main.blobs)"):
            problem = blob_problem(src, row)
            if problem:
                raise ArchiveError(f"{src.path}: blob sha256:{row['digest']} {problem}; nothing was merged "
                                   f"('webfreeze archive verify {src.path}' lists what uses it)")
        before = arc.conn.total_changes
        q(f"INSERT OR IGNORE INTO main.blobs SELECT * FROM {alias}.blobs WHERE codec != 'zstd-delta'")
        stats["blobs_added"] += arc.conn.total_changes - before
        # A delta's base may be a delta here: copy deltas as plain blobs (packing can redo them).
        for (digest,) in q(f"SELECT digest FROM {alias}.blobs WHERE codec = 'zstd-delta' "
                           "AND digest NOT IN (SELECT digest FROM main.blobs)").fetchall():
            data = src.get_blob(digest)
            codec, stored = blobs.encode(data)
            q("INSERT INTO main.blobs(digest, size, stored_size, codec, data) VALUES (?,?,?,?,?)",
              (digest, len(data), len(stored), codec, stored))
            stats["blobs_added"] += 1
        same_dict = src.meta().get("header_dictionary") == arc.meta().get("header_dictionary")
        if same_dict:
            cur = q(f"INSERT INTO main.exchanges ({_COPY_COLUMNS}) SELECT {_COPY_COLUMNS} FROM {alias}.exchanges "
                    "WHERE session_id IN temp.merge_sessions ORDER BY id")
            stats["exchanges_added"] += cur.rowcount
        else:  # header lists are compressed against each archive's own dictionary: re-encode them
            placeholders = ",".join("?" * len(_COPY_COLUMNS.split(",")))
            for row in src.conn.execute(f"SELECT {_COPY_COLUMNS} FROM exchanges WHERE session_id IN "
                                        f"({','.join('?' * len(new_sessions))}) ORDER BY id", new_sessions):
                values = dict(row)
                for col in ("req_headers", "resp_headers"):
                    if values[col] is not None:
                        values[col] = arc.encode_headers(src.decode_headers(values[col]))
                q(f"INSERT INTO main.exchanges ({_COPY_COLUMNS}) VALUES ({placeholders})", tuple(values.values()))
                stats["exchanges_added"] += 1
        pcols = "session_id, url, captured_at, title, screenshot, dom, extra"
        cur = q(f"INSERT INTO main.pages ({pcols}) SELECT {pcols} FROM {alias}.pages "
                "WHERE session_id IN temp.merge_sessions ORDER BY id")
        stats["pages_added"] += cur.rowcount
        q(f"INSERT OR IGNORE INTO main.digest_aliases SELECT * FROM {alias}.digest_aliases")
        for name, digest, size, updated in q(f"SELECT name, digest, size, updated_at FROM {alias}.documents").fetchall():
            if _session_documents(name, set(left_out)) or (crawl_left_out and name.startswith("crawls/")):
                stats["documents_left_out"] += 1
                continue
            mine = q("SELECT digest FROM main.documents WHERE name=?", (name,)).fetchone()
            if mine is None:
                q("INSERT INTO main.documents VALUES (?,?,?,?)", (name, digest, size, updated))
                stats["documents_added"] += 1
            elif mine[0] != digest:
                raise ArchiveError(f"{src.path}: document {name!r} differs from the one already in the destination")
    return dict(stats)


# ------------------------------------------------------------------------------------ gc
_REFERENCED = """
    SELECT payload FROM exchanges UNION SELECT req_body FROM exchanges WHERE req_body IS NOT NULL
    UNION SELECT screenshot FROM pages WHERE screenshot IS NOT NULL
    UNION SELECT dom FROM pages WHERE dom IS NOT NULL
    UNION SELECT digest FROM documents
    UNION SELECT json_extract(value, '$') FROM meta WHERE key = 'header_dictionary'"""


def _unreferenced_blobs(arc: Archive) -> list[tuple[str, int]]:
    """(digest, stored size) of blobs nothing refers to, keeping the bases of kept delta blobs."""
    rows = arc.conn.execute(f"SELECT digest, stored_size FROM blobs WHERE digest NOT IN ({_REFERENCED})").fetchall()
    doomed = {r[0] for r in rows}
    keep = {b for d, b in arc.conn.execute("SELECT digest, base FROM blobs WHERE base IS NOT NULL") if d not in doomed}
    return [(r[0], r[1]) for r in rows if r[0] not in keep]


def _delete_blobs(arc: Archive, digests: list[str]) -> None:
    with arc.transaction():
        arc.conn.executemany("DELETE FROM blobs WHERE digest=?", [(d,) for d in digests])
        arc.forget_known_blobs()
        arc.conn.execute("DELETE FROM digest_aliases WHERE digest NOT IN (SELECT digest FROM blobs)")


def gc(archive: str | os.PathLike, *, dry_run: bool = False) -> dict:
    """Delete blobs nothing refers to, then compact the file. With ``dry_run`` nothing is written
    (the archive is opened read-only: no writer lock, a read-only archive will do) and
    ``file_bytes_after`` is a forecast: the pages in use, less the freed blobs' bytes."""
    with Archive.open(archive, write=not dry_run) as arc:
        return _gc(arc, dry_run)


def _gc(arc: Archive, dry_run: bool) -> dict:
    rows = _unreferenced_blobs(arc)
    before = os.path.getsize(arc.path)
    freed = sum(n for _, n in rows)
    if dry_run:
        page_size, pages, free = (arc.conn.execute(f"PRAGMA {name}").fetchone()[0]
                                  for name in ("page_size", "page_count", "freelist_count"))
        after = max((pages - free) * page_size - freed, page_size)
    else:
        if rows:
            _delete_blobs(arc, [d for d, _ in rows])
        arc.conn.execute("VACUUM")
        arc.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        after = os.path.getsize(arc.path)
    return {"blobs_removed": len(rows), "blob_bytes_freed": freed, "file_bytes_before": before,
            "file_bytes_after": after}


# ------------------------------------------------------------------------------------ pack
def pack(archive_path: str | os.PathLike, out: str | os.PathLike | None = None, *, level: int | None = None,
         progress=None, verified: bool = False) -> dict:
    """Recompress every blob at a high zstd level and compact the file: the form to share.

    With ``out``, the original is left untouched and the packed copy appears at ``out`` only when
    complete. Content and digests never change, only how the bytes are stored.
    """
    level = level or blobs.PACK_LEVEL
    src = Path(archive_path)
    # every blob is read and stored again under its digest: a damaged one must not be re-stored
    if not verified:  # (``verified``: the caller ran the same checks just before)
        require_intact(src, action="nothing was packed")
    if out is None:
        return _pack_in_place(src, level, progress)
    dest = Path(out)
    check_new_archive(dest)
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    _remove_db_files(tmp)
    try:
        with Archive.open(src) as arc:
            arc.conn.execute("VACUUM INTO ?", (sqlite_uri(tmp),))
        try:
            stats = _pack_in_place(tmp, level, progress)
        except ArchiveError as exc:  # about the copy: name the archive it came from
            raise ArchiveError(str(exc).replace(str(tmp), str(src))) from None
        os.replace(tmp, dest)
        sync_dir(dest.parent)
    except BaseException:
        _remove_db_files(tmp)
        raise
    stats["file_bytes_before"] = os.path.getsize(src)
    return stats


PACK_PAGE_SIZE = 1024
HEADER_DICT_BYTES = 32 * 1024


def _retrain_header_dictionary(arc: Archive) -> None:
    """Replace the header dictionary with one made from this archive's own header lists.

    The samples are the header lists of the first capture of each (host, media type, status):
    every row then compresses against headers from its own servers.
    """
    from .urlkey import host_of

    q = arc.conn.execute
    seen: set[tuple] = set()
    samples: list[bytes] = []
    total = 0
    rows = q("SELECT id, url, mime, status, req_headers, resp_headers FROM exchanges ORDER BY id").fetchall()
    for row in rows:
        key = (host_of(row["url"]), row["mime"], row["status"])
        if key in seen:
            continue
        seen.add(key)
        for col in ("req_headers", "resp_headers"):
            if row[col] is not None:
                text = headers_json(arc.row_headers(row, col))
                samples.append(text)
                total += len(text)
        if total >= HEADER_DICT_BYTES:
            break
    if not samples:
        return
    # zstd finds matches best near the end of a raw-content dictionary: most common last.
    new_dict = b"".join(reversed(samples))[-HEADER_DICT_BYTES:]
    decoded = [(r["id"], arc.row_headers(r, "req_headers") if r["req_headers"] is not None else None,
                arc.row_headers(r, "resp_headers")) for r in rows]
    with arc.transaction():
        arc.write_meta("header_dictionary", arc.put_blob(new_dict))
        arc.reload_header_dict()
        for ex_id, req, resp in decoded:
            q("UPDATE exchanges SET req_headers=?, resp_headers=? WHERE id=?",
              (None if req is None else arc.encode_headers(req), arc.encode_headers(resp), ex_id))


def _pack_in_place(path: Path, level: int, progress) -> dict:
    """Recompress every blob; a blob that resembles an earlier one is stored as a delta against it.

    Candidates for a blob's base, tried in this order: the payloads of earlier captures of the same
    URL (the previous version of a page), then earlier blobs of the same media type and similar
    size. Bases are never deltas themselves, so reading any blob takes at most two decompressions.
    """
    before = os.path.getsize(path)
    stats = Counter()
    trial_level = min(level, 6)  # rank candidate bases cheaply; compress the winner at `level`

    with Archive.open(path, write=True) as arc, ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        q = arc.conn.execute
        first_use: dict[str, tuple[str, str]] = {}
        for payload, surt, mime in q("SELECT payload, surt, mime FROM exchanges ORDER BY id"):
            first_use.setdefault(payload, (surt, mime or ""))
        blob_rows = q("SELECT rowid, digest, size, codec FROM blobs ORDER BY rowid").fetchall()
        # Bases of deltas kept from an earlier pack must stay plain, or those deltas would break.
        old_bases = {b for (b,) in q("SELECT DISTINCT base FROM blobs WHERE base IS NOT NULL")}
        by_surt: dict[str, list[str]] = {}
        by_mime: dict[str, list[tuple[int, str]]] = {}
        is_delta: set[str] = set()
        raw_cache: dict[str, bytes] = {}

        def raw_of(digest: str) -> bytes:
            data = raw_cache.get(digest)
            if data is None:
                data = arc.get_blob(digest, verify=True)
                if len(raw_cache) > 64:
                    raw_cache.pop(next(iter(raw_cache)))
                raw_cache[digest] = data
            return data

        with arc.transaction():
            for _, digest, size, codec in blob_rows:
                raw = raw_of(digest)
                surt, mime = first_use.get(digest, ("", ""))
                candidates: list[str] = []
                if size >= 512 and digest not in old_bases:
                    candidates += [d for d in reversed(by_surt.get(surt, [])) if d not in is_delta][:2]
                    similar = sorted((abs(s - size), d) for s, d in by_mime.get(mime, [])
                                     if d not in is_delta and size / 2 <= s <= size * 2)
                    candidates += [d for _, d in similar if d not in candidates][: 4 - len(candidates)]
                solo = pool.submit(blobs.encode, raw, level, True)
                trials = [(c, pool.submit(blobs.encode_delta, raw, raw_of(c), trial_level)) for c in candidates]
                new_codec, new_data = solo.result()
                best_base, best_trial = None, None
                for c, fut in trials:
                    n = len(fut.result())
                    if best_trial is None or n < best_trial:
                        best_base, best_trial = c, n
                base = None
                if best_base is not None and best_trial < 0.9 * len(new_data):
                    delta = blobs.encode_delta(raw, raw_of(best_base), level)
                    if len(delta) < 0.9 * len(new_data):
                        new_codec, new_data, base = "zstd-delta", delta, best_base
                old = q("SELECT stored_size, codec, base FROM blobs WHERE digest=?", (digest,)).fetchone()
                if len(new_data) < old["stored_size"]:
                    q("UPDATE blobs SET codec=?, data=?, stored_size=?, base=? WHERE digest=?",
                      (new_codec, new_data, len(new_data), base, digest))
                    stats["recompressed"] += 1
                    if base:
                        is_delta.add(digest)
                        stats["deltas"] += 1
                elif old["codec"] == "zstd-delta":
                    is_delta.add(digest)  # kept as it was: still a delta, so never a base
                if surt:
                    by_surt.setdefault(surt, []).append(digest)
                by_mime.setdefault(mime, []).append((size, digest))
                if progress:
                    progress(1)
        _retrain_header_dictionary(arc)
        _delete_blobs(arc, [d for d, _ in _unreferenced_blobs(arc)])  # the replaced header dictionary
        # Small pages waste less at the tail of each blob and in small tables; a packed archive is
        # read far more than it is written. WAL must be off while the page size changes.
        for pragma in ("PRAGMA wal_checkpoint(TRUNCATE)", "PRAGMA journal_mode=DELETE",
                       f"PRAGMA page_size={PACK_PAGE_SIZE}", "VACUUM", "PRAGMA journal_mode=WAL"):
            q(pragma).fetchall()  # a pragma's unread result row would keep its statement (and a lock) open
    return {"blobs": len(blob_rows), "blobs_recompressed": stats["recompressed"], "deltas": stats["deltas"],
            "file_bytes_before": before, "file_bytes_after": os.path.getsize(path)}
