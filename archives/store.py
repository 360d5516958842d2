"""The archive: one SQLite file (WAL mode) holding the index and the content-addressed blobs.

Why one file: a transaction covers the index rows and the blobs they point to, so a crash at any
moment leaves an archive that opens and verifies, and sharing an archive means copying one file.
Nothing read from an archive is ever executed: headers and metadata are JSON, payloads are bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import sqlite3
import threading
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from webfreeze.common.files import OutputError, check_new_file, with_side_files
from webfreeze.common.http import header_value

from . import blobs, header_dictionary
from .bodykey import body_key as compute_body_key
from .descriptors import _file_closed, _file_opened, _unlock, close_archive_fd, open_archive_fd
from .errors import ArchiveError, ArchiveLocked
from .records import DocumentRecord, ExchangeRecord, IndexEntry, PageRecord
from .schema import FORMAT_NAME, FORMAT_VERSION, INSERT_ALIAS, INSERT_BLOB, INSERT_EXCHANGE, _create_schema
from .timeutil import normalize_time, now, parse_time
from .urlkey import host_of, surt_key

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_LEVEL = 9
MAX_HEADER_BYTES = 4 << 20

Headers = list[tuple[str, str]]

def mime_of(headers: Headers) -> str:
    """The media type of a Content-Type header, lower-cased, without parameters."""
    value = header_value(headers, "content-type") or ""
    return value.split(";")[0].strip().lower()


@functools.cache
def tool_version() -> str:
    """The installed webfreeze version, recorded in every archive we create."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("webfreeze")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def surt_prefix_range(key: str) -> tuple[str, str]:
    """Bounds of an indexed range scan for SURT keys starting with ``key`` (LIKE would not use the index)."""
    return key, key + "\U0010ffff"


# Encoders built once: json.dumps with options builds a new one per call.
_HEADERS_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_SORTED_JSON = json.JSONEncoder(sort_keys=True)


def headers_json(headers: Headers) -> bytes:
    """The canonical JSON form of a header list (what the header dictionary is made of)."""
    return _HEADERS_JSON.encode(headers).encode("utf-8")  # pairs, as tuples or lists, become arrays


def header_compressor(d: zstandard.ZstdCompressionDict) -> zstandard.ZstdCompressor:
    """How a header list's JSON is compressed against an archive's dictionary (not thread-safe:
    one per thread; the dictionary itself may be shared)."""
    return zstandard.ZstdCompressor(dict_data=d, level=HEADER_LEVEL, write_checksum=False)


def sqlite_uri(path: str | os.PathLike, **params: str) -> str:
    """A ``file:`` URI for SQLite; ``#``, ``?`` and ``%`` in the path are escaped, not interpreted."""
    from urllib.parse import urlencode

    uri = Path(path).resolve().as_uri()
    return f"{uri}?{urlencode(params)}" if params else uri


class NotAnArchive(ArchiveError):
    """A file that opens as SQLite but holds no webfreeze archive."""


def archive_files(archive: str | os.PathLike) -> list[Path]:
    """The files an archive at ``archive`` consists of (the database and SQLite's side files)."""
    return with_side_files(archive)


def check_new_archive(path: Path) -> None:
    """Refuse, in one line, a path where a new archive cannot be created."""
    try:
        check_new_file(path)
    except OutputError as exc:
        raise ArchiveError(str(exc)) from None


@dataclass
class Exchange:
    """One HTTP request and its response as captured.

    ``payload`` is the response entity as the server sent it, transfer coding removed and content
    coding (gzip, br) kept; ``extra`` holds protocol details needed to replay or re-export exactly.
    """

    url: str
    captured_at: str
    status: int
    resp_headers: Headers
    payload: bytes = b""
    method: str = "GET"
    req_headers: Headers | None = None
    req_body: bytes | None = None
    reason: str = ""
    http_version: str = "HTTP/1.1"
    kind: str = "response"  # "response" (HTTP) or "resource" (no HTTP envelope)
    extra: dict = field(default_factory=dict)
    session_id: str | None = None
    # Set instead of ``payload`` when the payload is already stored (a revisit of a known capture).
    payload_digest: str | None = None


# ------------------------------------------------------------------------------ file descriptors
def _time_window(where: list, params: list, since, until) -> None:
    """Add "captured between ``since`` and ``until`` (inclusive)" to a query's conditions."""
    if since:
        where.append("captured_at >= ?")
        params.append(normalize_time(since))
    if until:
        where.append("captured_at <= ?")
        params.append(normalize_time(until))


# The document a recorded session writes of the requests it asked whose answer was still coming when
# it ended (a long poll the site was holding): ``unfinished/<session>.json``, ``{"version": 1,
# "requests": ["GET URL", ...]}`` (recorder/session.py writes it, replayer/replay.py holds them).
UNFINISHED_PREFIX = "unfinished/"


class Archive:
    """An open archive. Use :meth:`open` or :meth:`create`; close it (or use ``with``)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, writable: bool, lock_fd: int | None):
        self.path = path
        self.conn = conn
        self.writable = writable
        self._lock_fd = lock_fd
        self._lock_owner = os.getpid()  # (a forked child must not give the parent's lock up)
        key = _file_opened(path)  # (see close_archive_fd); an Archive never closed gives it back when collected
        self._file_release = weakref.finalize(self, _file_closed, key) if key is not None else None
        self._in_tx = False
        self._write_lock = threading.RLock()
        self._known_blobs: set[str] = set()
        # blobs this object stored for a document and nothing else has stored since: when the
        # document is replaced, its old blob goes (a crawl rewrites its state after every page)
        self._document_only: set[str] = set()
        self._header_codec: tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor] | None = None
        self._header_dict: zstandard.ZstdCompressionDict | None = None
        self._base_cache: dict[str, bytes] = {}  # decoded bases of delta blobs, a few at a time
        self._writeback = None  # a privately built archive's early writeback (see write_ahead)

    @functools.cached_property
    def db(self):
        """The connection as a ``sqlite_utils.Database`` (imported here, when first asked for: only
        creating an archive's schema needs it, and a command that only reads starts faster)."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    # ----------------------------------------------------------------- opening and closing
    @classmethod
    def create(cls, path: str | os.PathLike, *, creator: str = "", description: str = "",
               license: str = "", replay_rules: dict | None = None, _private: bool = False) -> "Archive":
        """Create a new, empty archive at ``path`` (which must not exist) and open it for writing.

        ``_private``: the file is not yet visible to anyone (see ``new_archive_atomically``), so it
        is built with an in-memory rollback journal and no syncs (a crash only loses a file that is
        thrown away anyway), which spares writing every page twice (WAL, then checkpoint);
        ``_publish`` turns it into the usual WAL-mode file and closes it."""
        p = Path(path)
        check_new_archive(p)
        conn = cls._connect(p, readonly=False)
        arc = cls(p, conn, True, cls._lock(p))
        db = arc.db
        if _private:
            db.execute("PRAGMA journal_mode=MEMORY")
            db.execute("PRAGMA synchronous=OFF")
            from .publish import _Writeback

            arc._writeback = _Writeback(p)
        else:
            db.execute("PRAGMA journal_mode=WAL")
        with arc.transaction():
            _create_schema(db)
            for key, value in {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "created_at": now(),
                "tool": "webfreeze",
                "tool_version": tool_version(),
                "creator": creator,
                "description": description,
                "license": license,
                "replay_rules": replay_rules or {},
                "header_dictionary": arc.put_blob(header_dictionary.RAW),
            }.items():
                arc.write_meta(key, value)
        return arc

    @classmethod
    def open(cls, path: str | os.PathLike, *, write: bool = False) -> "Archive":
        """Open an existing archive, read-only unless ``write``; one writer at a time."""
        p = Path(path)
        if not p.exists():
            raise ArchiveError(f"{p}: no such archive")
        if p.is_dir():
            raise ArchiveError(f"{p}: is a directory, not an archive file")
        try:
            fd = open_archive_fd(p)
            try:
                head = os.pread(fd, len(SQLITE_MAGIC), 0)
            finally:
                close_archive_fd(fd)  # this process may have the archive open already
        except OSError as exc:
            raise ArchiveError(f"{p}: cannot read: {exc.strerror}") from None
        if head != SQLITE_MAGIC:
            raise ArchiveError(f"{p}: not a webfreeze archive")
        if write and not os.access(p, os.W_OK):
            raise ArchiveError(f"{p}: archive is not writable")
        if write:
            for f in archive_files(p)[1:]:
                if f.exists() and not os.access(f, os.W_OK):
                    # (SQLite would only say "attempt to write a readonly database", naming no file)
                    raise ArchiveError(f"{f}: SQLite's side file of the archive is not writable, so the archive "
                                       f"cannot be written (while no process has the archive open, it can be deleted)")
        lock_fd = cls._lock(p) if write else None
        conn = arc = None
        side = [f for f in archive_files(p)[1:] if not f.exists()]  # SQLite's files that opening may create
        try:
            conn = cls._connect(p, readonly=not write)
            arc = cls(p, conn, write, lock_fd)
            arc._check_format()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if arc is not None:
                arc._release_file()
            if lock_fd is not None:
                _unlock(lock_fd, os.getpid())
            if isinstance(exc, NotAnArchive):
                for f in side:  # nothing of ours beside somebody else's file
                    with contextlib.suppress(FileNotFoundError):
                        f.unlink()
            raise
        return arc

    @staticmethod
    def _connect(p: Path, readonly: bool) -> sqlite3.Connection:
        try:
            if readonly and not os.access(p.parent, os.W_OK) and not os.path.exists(f"{p}-wal"):
                # a read-only folder (a mounted share): nothing can change the file under us
                # (A read-only file in a folder we can write is not read so: its owner may be writing
                # it, and an immutable reader takes no locks; SQLite's side files are made then, as
                # read-only as the file, and a later writer that cannot write them says so.)
                uri = sqlite_uri(p, mode="ro", immutable="1")
            elif readonly:
                uri = sqlite_uri(p, mode="ro")
            else:
                uri = sqlite_uri(p)
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10, check_same_thread=False)
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=10000")
            if not readonly:
                conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise ArchiveError(f"{p}: {'damaged archive' if _damaged(exc) else 'cannot open archive'}: {exc}") from None
        conn.row_factory = sqlite3.Row
        return conn

    @staticmethod
    def _lock(p: Path) -> int:
        """Take the single-writer lock (flock on the file itself; released if the process dies)."""
        fd = open_archive_fd(p, os.O_RDWR | os.O_CREAT)  # (flock takes any descriptor, a parked read-only one too)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            close_archive_fd(fd)  # (a reader in this process may have it open)
            raise ArchiveLocked(f"{p}: archive is already open for writing by another process") from None
        return fd

    def _check_format(self) -> None:
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
            ver = self.conn.execute("SELECT value FROM meta WHERE key='format_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            if _damaged(exc):
                raise NotAnArchive(f"{self.path}: damaged archive: {exc}") from None
            raise NotAnArchive(f"{self.path}: not a webfreeze archive") from None
        try:
            name, version = json.loads(row[0]), json.loads(ver[0])
        except (TypeError, ValueError):
            raise NotAnArchive(f"{self.path}: not a webfreeze archive") from None
        if name != FORMAT_NAME or not isinstance(version, int):
            raise NotAnArchive(f"{self.path}: not a webfreeze archive")
        if version > FORMAT_VERSION:
            raise ArchiveError(
                f"{self.path}: archive format version {version} is newer than this webfreeze "
                f"supports ({FORMAT_VERSION}); upgrade webfreeze"
            )

    def write_ahead(self) -> None:
        """For a privately built archive (``create(_private=True)``): start writing what SQLite has
        written to the file so far to the disk, on a thread of its own, so that the sync before
        the file is published has less left to wait for. A no-op for any other archive."""
        if self._writeback is not None:
            self._writeback.start()

    def close(self, *, checkpoint: bool = True) -> None:
        """Close the archive; the WAL is checkpointed so the file stands alone (``checkpoint=False``
        leaves that to SQLite's own close, for a WAL known to be empty)."""
        if self.conn is None:
            return
        try:
            if self._writeback is not None:
                writeback, self._writeback = self._writeback, None
                writeback.close()  # an error the disk gave it stops here: nothing half-written is published
            if self.writable and checkpoint:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self.conn.close()
            self.conn = None
            self._release_file()
            if self._lock_fd is not None:
                _unlock(self._lock_fd, self._lock_owner)
                self._lock_fd = None

    def _release_file(self) -> None:
        if self._file_release is not None:
            self._file_release()  # (runs once)
            self._file_release = None

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------------- transactions
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside land together or not at all. Nested calls join the outer one.

        Threads sharing one open archive (a recording proxy and a crawler) take turns here."""
        self.require_write()
        with self._write_lock:
            if self._in_tx:
                yield
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self._in_tx = True
            try:
                yield
            except BaseException:
                self.conn.execute("ROLLBACK")
                self._known_blobs.clear()
                self._document_only.clear()
                raise
            else:
                self.conn.execute("COMMIT")
            finally:
                self._in_tx = False

    @contextlib.contextmanager
    def savepoint(self, name: str = "part") -> Iterator[None]:
        """Inside the write transaction: if the block raises, undo only its writes, then re-raise."""
        with self.transaction():
            self.conn.execute(f"SAVEPOINT {name}")
            try:
                yield
            except BaseException:
                self.conn.execute(f"ROLLBACK TO {name}")
                self.conn.execute(f"RELEASE {name}")
                self._known_blobs.clear()
                self._document_only.clear()
                raise
            self.conn.execute(f"RELEASE {name}")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one consistent state, whatever a concurrent writer commits meanwhile."""
        if self._in_tx:
            yield
            return
        self.conn.execute("BEGIN")
        self._in_tx = True
        try:
            self.conn.execute("SELECT count(*) FROM meta").fetchone()  # start the read now
            yield
        finally:
            self._in_tx = False
            self.conn.execute("COMMIT")

    def capture_range(self) -> tuple[str, str] | None:
        """(first, last) capture time of the exchanges, or None for an empty archive."""
        first, last = self.conn.execute("SELECT min(captured_at), max(captured_at) FROM exchanges").fetchone()
        return (first, last) if first else None

    def require_write(self) -> None:
        """Refuse a write to an archive opened read-only (an :class:`ArchiveError`)."""
        if not self.writable:
            raise ArchiveError(f"{self.path}: archive is open read-only")

    # ----------------------------------------------------------------- metadata
    def write_meta(self, key: str, value) -> None:
        """Set one metadata field inside the caller's transaction (:meth:`set_meta` opens its own)."""
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, json.dumps(value, sort_keys=True)),
        )

    def set_meta(self, key: str, value) -> None:
        """Set one metadata field (creator, description, license, replay_rules, ...)."""
        with self.transaction():
            self.write_meta(key, value)

    def meta(self) -> dict:
        """All metadata fields, JSON-decoded."""
        return {r["key"]: json.loads(r["value"]) for r in self.conn.execute("SELECT key, value FROM meta")}

    # ----------------------------------------------------------------- blobs
    def put_blob(self, data: bytes) -> str:
        """Store ``data`` once (deduplicated by SHA-256) and return its hex digest."""
        self.require_write()
        digest = blobs.digest_of(data)
        self._document_only.discard(digest)
        if digest in self._known_blobs:
            return digest
        if self.conn.execute("SELECT 1 FROM blobs WHERE digest=?", (digest,)).fetchone() is None:
            codec, stored = blobs.encode(data)
            return self.put_encoded_blob(digest, len(data), codec, stored)
        self.remember_blob(digest)
        return digest

    def put_encoded_blob(self, digest: str, size: int, codec: str, stored: bytes) -> str:
        """Store a blob whose digest and encoding (``blobs.encode``) were computed by the caller,
        e.g. on worker threads during an import; a blob already present is left as it is."""
        self.require_write()
        self._document_only.discard(digest)
        if digest not in self._known_blobs:
            with self.transaction():
                self.conn.execute(INSERT_BLOB, (digest, size, len(stored), codec, stored))
            self.remember_blob(digest)
        return digest

    def knows_blob(self, digest: str) -> bool:
        """Whether blob ``digest`` is known to be stored (a cache: False does not mean absent)."""
        return digest in self._known_blobs

    def claim_blob(self, digest: str) -> bool:
        """:meth:`knows_blob`, asked by a writer about to refer to the blob: a document's blob that
        something else now refers to is no longer freed when the document is replaced."""
        self._document_only.discard(digest)
        return digest in self._known_blobs

    def remember_blob(self, digest: str) -> None:
        """Note that blob ``digest`` is stored (it was written in this archive's transaction)."""
        self._document_only.discard(digest)
        if len(self._known_blobs) > 200_000:
            self._known_blobs.clear()
        self._known_blobs.add(digest)

    def forget_known_blobs(self) -> None:
        """Empty the cache of known blobs (after blobs were deleted)."""
        self._known_blobs.clear()

    def has_blob(self, digest: str) -> bool:
        return self.conn.execute("SELECT 1 FROM blobs WHERE digest=?", (digest,)).fetchone() is not None

    def get_blob(self, digest: str, *, verify: bool = False) -> bytes:
        """The uncompressed bytes of blob ``digest``. A damaged zstd frame is always an error (its
        checksum); ``verify`` also recomputes the SHA-256, which catches damage in a blob stored
        raw (the replay does, once per response it builds; ``archive verify`` checks everything)."""
        row = self.conn.execute("SELECT digest, size, codec, data, base FROM blobs WHERE digest=?",
                                (digest,)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path}: blob sha256:{digest} is missing")
        data = self.decode_blob(row)
        if verify and hashlib.sha256(data).hexdigest() != digest:
            raise ArchiveError(f"{self.path}: blob sha256:{digest} is corrupt (its bytes do not match their digest)")
        return data

    def decode_blob(self, row: sqlite3.Row) -> bytes:
        """Decode a ``blobs`` row (digest, size, codec, data, base), fetching a delta's base."""
        base = None
        if row["codec"] == "zstd-delta":
            base = self._base_cache.get(row["base"])
            if base is None:
                brow = self.conn.execute("SELECT size, codec, data FROM blobs WHERE digest=?", (row["base"],)).fetchone()
                if brow is None or brow["codec"] == "zstd-delta":
                    raise ArchiveError(f"{self.path}: blob sha256:{row['digest']} has a missing or invalid base")
                base = self._decode_plain(row["base"], brow)
                if len(self._base_cache) >= 8:
                    self._base_cache.pop(next(iter(self._base_cache)))
                self._base_cache[row["base"]] = base
        try:
            return blobs.decode(row["codec"], row["data"], row["size"], base)
        except Exception as exc:  # corrupt frame: report, do not crash the caller
            raise ArchiveError(f"{self.path}: blob sha256:{row['digest']} is corrupt ({exc})") from None

    def _decode_plain(self, digest: str, row) -> bytes:
        try:
            return blobs.decode(row["codec"], row["data"], row["size"])
        except Exception as exc:
            raise ArchiveError(f"{self.path}: blob sha256:{digest} is corrupt ({exc})") from None

    def add_alias(self, alias: str, digest: str) -> None:
        """Remember that another tool's digest ``alias`` (e.g. ``sha1:BASE32``) names blob ``digest``."""
        with self.transaction():
            self.conn.execute(INSERT_ALIAS, (alias, digest))

    def resolve_alias(self, alias: str) -> str | None:
        row = self.conn.execute("SELECT digest FROM digest_aliases WHERE alias=?", (alias,)).fetchone()
        return row[0] if row else None

    # ----------------------------------------------------------------- header lists
    def _codec(self) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        if self._header_codec is None:
            d = self.header_dict()
            self._header_codec = (header_compressor(d), zstandard.ZstdDecompressor(dict_data=d))
        return self._header_codec

    def header_dict(self) -> zstandard.ZstdCompressionDict:
        """The archive's header dictionary, ready to compress with (see :func:`header_compressor`)."""
        if self._header_dict is None:
            digest = self.meta().get("header_dictionary")
            if not digest:
                raise ArchiveError(f"{self.path}: archive has no header dictionary")
            d = zstandard.ZstdCompressionDict(self.get_blob(digest), dict_type=zstandard.DICT_TYPE_RAWCONTENT)
            d.precompute_compress(level=HEADER_LEVEL)
            self._header_dict = d
        return self._header_dict

    def reload_header_dict(self) -> None:
        """Forget the cached header dictionary and codec, after the stored dictionary was replaced."""
        self._header_codec = self._header_dict = None

    def encode_headers(self, headers: Headers) -> bytes:
        """A header list as stored: compact JSON, zstd-compressed against the archive's dictionary."""
        return self._codec()[0].compress(headers_json(headers))

    def decode_headers(self, value: bytes | None) -> Headers:
        """Inverse of :meth:`encode_headers` (an absent request side decodes to ``[]``)."""
        if value is None:
            return []
        try:
            data = self._codec()[1].decompress(value, max_output_size=MAX_HEADER_BYTES)
            return [(str(k), str(v)) for k, v in json.loads(data)]
        except (zstandard.ZstdError, ValueError, TypeError) as exc:
            raise ArchiveError(f"{self.path}: a stored header list is corrupt ({exc})") from None

    # ----------------------------------------------------------------- sessions
    def new_session(self, kind: str, *, source: str = "", tool: str = "", info: dict | None = None,
                    session_id: str | None = None, started_at: str | None = None) -> str:
        """Start a capture session and return its id (one per recording run or imported file)."""
        sid = session_id or uuid.uuid4().hex[:16]
        with self.transaction():
            self.conn.execute(
                "INSERT INTO sessions(id, kind, source, tool, started_at, ended_at, info) VALUES (?,?,?,?,?,?,?)",
                (sid, kind, source, tool, started_at or now(), None, json.dumps(info or {}, sort_keys=True)),
            )
        return sid

    def end_session(self, session_id: str, info: dict | None = None) -> None:
        with self.transaction():
            self.conn.execute("UPDATE sessions SET ended_at=? WHERE id=?", (now(), session_id))
            if info is not None:
                self.conn.execute("UPDATE sessions SET info=? WHERE id=?", (json.dumps(info, sort_keys=True), session_id))

    def session(self, session_id: str) -> dict | None:
        """A capture session (id, kind, source, tool, started_at, ended_at, info), or None."""
        row = self.conn.execute("SELECT * FROM sessions WHERE id=?", (session_id,)).fetchone()
        if row is None:
            return None
        out = dict(row)
        out["info"] = json.loads(out["info"]) if out["info"] else {}
        return out

    # ----------------------------------------------------------------- exchanges
    def add_exchange(self, ex: Exchange) -> int:
        """Store one exchange (its payload and request body as blobs) and return its row id."""
        if not ex.session_id:
            raise ArchiveError("an exchange needs a capture session")
        with self.transaction():
            payload, payload_size = self.store_payload(ex)
            req_digest = self.put_blob(ex.req_body) if ex.req_body else None
            cur = self.conn.execute(INSERT_EXCHANGE, self.exchange_values(ex, payload, payload_size, req_digest))
            return cur.lastrowid

    def store_payload(self, ex: Exchange) -> tuple[str, int]:
        """(digest, size) of an exchange's payload, storing it unless it is already a known blob."""
        if ex.payload_digest:
            row = self.conn.execute("SELECT size FROM blobs WHERE digest=?", (ex.payload_digest,)).fetchone()
            if row is None:
                raise ArchiveError(f"blob sha256:{ex.payload_digest} is not in the archive")
            return ex.payload_digest, row[0]
        return self.put_blob(ex.payload), len(ex.payload)

    def exchange_values(self, ex: Exchange, payload: str, payload_size: int, req_digest: str | None, *,
                        captured_at: str | None = None, resp_headers: bytes | None = None) -> list:
        """The ``exchanges`` row of ``ex`` (all columns but ``id``, in ``EXCHANGE_COLUMNS`` order).

        ``captured_at`` (already normalised) and ``resp_headers`` (already encoded) skip work a
        caller has done; the row is the same either way."""
        method, req_headers, _, req_body_size, bkey = self.request_values(ex.method, ex.req_headers, ex.req_body,
                                                                          req_digest)
        return [
            ex.session_id, captured_at or normalize_time(ex.captured_at), method, ex.url, surt_key(ex.url),
            bkey, int(ex.status), ex.reason, mime_of(ex.resp_headers), ex.http_version, ex.kind,
            req_headers, req_digest, req_body_size,
            self.encode_headers(ex.resp_headers) if resp_headers is None else resp_headers, payload, payload_size,
            _SORTED_JSON.encode(ex.extra) if ex.extra else None,
        ]

    def request_values(self, method: str, req_headers: Headers | None, req_body: bytes | None,
                       req_digest: str | None, encoded: bytes | None = None) -> tuple:
        """(method, req_headers, req_body, req_body_size, body_key) columns of a request side;
        ``encoded`` is ``req_headers`` already encoded by the caller."""
        bkey = compute_body_key(header_value(req_headers or [], "content-type"), req_body) if req_body else ""
        if encoded is None and req_headers is not None:
            encoded = self.encode_headers(req_headers)
        return method.upper(), encoded, req_digest, len(req_body) if req_body else 0, bkey

    def set_request(self, exchange_id: int, method: str, req_headers: Headers, req_body: bytes | None) -> None:
        """Attach the request side to an exchange stored before its request was seen."""
        with self.transaction():
            req_digest = self.put_blob(req_body) if req_body else None
            values = self.request_values(method, req_headers, req_body, req_digest)
            self.conn.execute(
                "UPDATE exchanges SET method=?, req_headers=?, req_body=?, req_body_size=?, body_key=? WHERE id=?",
                (*values, exchange_id),
            )

    # Row-level reads, for this package's own modules (import, export, verify, maintenance, redact);
    # every other stage reads the typed records below.
    def exchange_row(self, exchange_id: int) -> sqlite3.Row | None:
        """The ``exchanges`` row ``exchange_id`` (None if there is none)."""
        return self.conn.execute("SELECT * FROM exchanges WHERE id=?", (exchange_id,)).fetchone()

    def exchange_rows(self, where: str = "", params: tuple = (), order: str = "id") -> Iterator[sqlite3.Row]:
        """The ``exchanges`` rows matching the SQL ``where`` (with ``params``), in ``order``."""
        sql = "SELECT * FROM exchanges" + (f" WHERE {where}" if where else "") + f" ORDER BY {order}"
        yield from self.conn.execute(sql, params)

    def row_headers(self, row: sqlite3.Row, column: str) -> Headers:
        """The decoded ``req_headers`` or ``resp_headers`` of an exchange row."""
        return self.decode_headers(row[column])

    # ----------------------------------------------------------------- typed reads
    def exchange(self, exchange_id: int) -> ExchangeRecord | None:
        """The exchange with id ``exchange_id``, or None."""
        row = self.exchange_row(exchange_id)
        return None if row is None else ExchangeRecord(self, row)

    def exchanges(self, *, url: str | None = None, prefix: str | None = None, host: str | None = None,
                  method: str | None = None, status: int | None = None, mime: str | None = None,
                  kind: str | None = None, session: str | None = None, body_key: str | None = None,
                  since: str | None = None, until: str | None = None, order: str = "id",
                  limit: int | None = None, offset: int = 0) -> Iterator[ExchangeRecord]:
        """Iterate the stored exchanges as :class:`ExchangeRecord` s, keeping those that match every
        filter given: ``url`` exactly; ``prefix`` a URL whose SURT key the capture's starts with (an
        index range scan: ``http://example.com/a`` covers ``/a``, ``/a/b``, ``/ab``, any scheme);
        ``host`` (case-insensitive, no port); ``method``; ``status``; ``mime`` (``text/*`` matches a
        family); ``kind`` (``response`` or ``resource``); ``session`` (a capture session's id);
        ``body_key`` (the canonical request body, ``""`` for none); ``since`` / ``until`` (capture
        time bounds, inclusive, ISO 8601 or 1-14 digits). ``order``: ``id`` (storage order, the
        default), ``time`` (capture time) or ``url`` (then capture time). ``limit`` and ``offset``
        page through the result."""
        where, params = [], []
        if url is not None:
            where.append("surt = ? AND url = ?")
            params += [surt_key(url), url]
        if prefix:
            where.append("surt >= ? AND surt < ?")
            params += list(surt_prefix_range(surt_key(prefix)))
        if method:
            where.append("method = ?")
            params.append(method.upper())
        if status is not None:
            where.append("status = ?")
            params.append(int(status))
        if mime:
            where.append("mime LIKE ?" if "*" in mime else "mime = ?")
            params.append(mime.replace("*", "%").lower())
        if kind:
            where.append("kind = ?")
            params.append(kind)
        if session:
            where.append("session_id = ?")
            params.append(session)
        if body_key is not None:
            where.append("body_key = ?")
            params.append(body_key)
        _time_window(where, params, since, until)
        orders = {"id": "id", "time": "captured_at, id", "url": "url, captured_at, id"}
        if order not in orders:
            raise ValueError(f"order must be one of {', '.join(orders)}")
        sql = "SELECT * FROM exchanges" + (f" WHERE {' AND '.join(where)}" if where else "") + f" ORDER BY {orders[order]}"
        if host is None:  # paged in SQL; a host filter is applied here, so it pages here too
            if limit is not None or offset:
                sql += " LIMIT ? OFFSET ?"
                params += [-1 if limit is None else int(limit), int(offset)]
            for row in self.conn.execute(sql, params):
                yield ExchangeRecord(self, row)
            return
        wanted, skipped, given = host.lower(), 0, 0
        for row in self.conn.execute(sql, params):
            if host_of(row["url"]) != wanted:
                continue
            if skipped < offset:
                skipped += 1
                continue
            if limit is not None and given >= limit:
                return
            given += 1
            yield ExchangeRecord(self, row)

    def index_entries(self, *, kind: str | None = "response") -> Iterator[IndexEntry]:
        """The index columns of every exchange (of ``kind``; None: all), no headers or bytes: what
        a request matcher builds its tables from."""
        sql = "SELECT id, method, url, body_key, captured_at, session_id, mime, status FROM exchanges"
        rows = self.conn.execute(sql + " WHERE kind=?", (kind,)) if kind else self.conn.execute(sql)
        for r in rows:
            yield IndexEntry(r[0], r[1], r[2], r[3] or "", r[4], r[5], (r[6] or "").lower(), r[7])

    def lookup_exact(self, method: str, url: str, body_key: str = "") -> list[ExchangeRecord]:
        """Captures of exactly (method, URL, body key), oldest first (recorded order)."""
        return [ExchangeRecord(self, r) for r in self.conn.execute(
            "SELECT * FROM exchanges WHERE method=? AND url=? AND body_key=? ORDER BY captured_at, id",
            (method.upper(), url, body_key),
        )]

    def lookup_surt(self, key: str, *, prefix: bool = False, limit: int | None = None) -> list[ExchangeRecord]:
        """Captures whose SURT key equals ``key`` or, with ``prefix``, starts with it."""
        if prefix:
            sql = "SELECT * FROM exchanges WHERE surt >= ? AND surt < ? ORDER BY surt, captured_at, id"
            params: tuple = surt_prefix_range(key)
        else:
            sql = "SELECT * FROM exchanges WHERE surt = ? ORDER BY captured_at, id"
            params = (key,)
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [ExchangeRecord(self, r) for r in self.conn.execute(sql, params)]

    def closest(self, url: str, when: str, *, method: str | None = None) -> ExchangeRecord | None:
        """The capture of ``url`` (by SURT key) closest in time to ``when``; ties go to the earlier."""
        key = surt_key(url)
        t = normalize_time(when)
        extra = " AND method=?" if method else ""
        params = (key, t) + ((method.upper(),) if method else ())
        before = self.conn.execute(
            f"SELECT * FROM exchanges WHERE surt=? AND captured_at<=?{extra} ORDER BY captured_at DESC, id DESC LIMIT 1",
            params,
        ).fetchone()
        after = self.conn.execute(
            f"SELECT * FROM exchanges WHERE surt=? AND captured_at>?{extra} ORDER BY captured_at, id LIMIT 1",
            params,
        ).fetchone()
        if before is None or after is None:
            row = before or after
        else:
            target = parse_time(t)
            d_before = target - parse_time(before["captured_at"])
            d_after = parse_time(after["captured_at"]) - target
            row = before if d_before <= d_after else after
        return None if row is None else ExchangeRecord(self, row)

    # ----------------------------------------------------------------- pages and documents
    def add_page(self, *, session_id: str, url: str, captured_at: str, title: str = "",
                 screenshot: bytes | None = None, dom: bytes | None = None, extra: dict | None = None) -> int:
        """Store a page record (screenshot PNG and DOM snapshot as blobs)."""
        with self.transaction():
            shot = self.put_blob(screenshot) if screenshot else None
            dom_digest = self.put_blob(dom) if dom else None
            cur = self.conn.execute(
                "INSERT INTO pages(session_id, url, captured_at, title, screenshot, dom, extra) VALUES (?,?,?,?,?,?,?)",
                (session_id, url, normalize_time(captured_at), title, shot, dom_digest,
                 json.dumps(extra, sort_keys=True) if extra else None),
            )
            return cur.lastrowid

    def page_rows(self) -> Iterator[sqlite3.Row]:
        """The ``pages`` rows in id order (the package's own modules; others read :meth:`pages`)."""
        yield from self.conn.execute("SELECT * FROM pages ORDER BY id")

    def pages(self, *, url: str | None = None, since: str | None = None, until: str | None = None,
              limit: int | None = None) -> Iterator[PageRecord]:
        """Iterate the page records as :class:`PageRecord` s in storage order, keeping those of
        ``url`` and captured between ``since`` and ``until`` (inclusive) when given."""
        where, params = [], []
        if url is not None:
            where.append("url = ?")
            params.append(url)
        _time_window(where, params, since, until)
        sql = "SELECT * FROM pages" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        for row in self.conn.execute(sql, params):
            yield PageRecord(self, row)

    def documents(self, *, prefix: str = "") -> Iterator[DocumentRecord]:
        """Iterate the named JSON documents (whose names start with ``prefix``) by name."""
        rows = self.conn.execute("SELECT name, digest, size, updated_at FROM documents WHERE name >= ? AND name < ? "
                                 "ORDER BY name", (prefix, prefix + "\U0010ffff"))
        for row in rows:
            yield DocumentRecord(self, row)

    def counts(self) -> dict:
        """How many exchanges, pages, documents, sessions and blobs the archive holds, and the
        blobs' bytes (``blob_bytes`` uncompressed, ``stored_bytes`` as stored)."""
        q = self.conn.execute
        out = {t: q(f"SELECT count(*) FROM {t}").fetchone()[0]
               for t in ("exchanges", "pages", "documents", "sessions")}
        out["blobs"], out["blob_bytes"], out["stored_bytes"] = q(
            "SELECT count(*), coalesce(sum(size),0), coalesce(sum(stored_size),0) FROM blobs").fetchone()
        return out

    def is_empty(self) -> bool:
        """Whether the archive holds no exchange and no page record."""
        return not self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM exchanges) OR EXISTS (SELECT 1 FROM pages)").fetchone()[0]

    def put_document(self, name: str, value) -> str:
        """Store a named JSON document (task suite, ground truth, trajectory); returns its digest."""
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise ArchiveError(f"bad document name {name!r}")
        data = json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")
        with self.transaction():
            old = self.conn.execute("SELECT digest FROM documents WHERE name=?", (name,)).fetchone()
            new_blob = not self.has_blob(blobs.digest_of(data))
            digest = self.put_blob(data)
            self.conn.execute(
                "INSERT INTO documents(name, digest, size, updated_at) VALUES (?,?,?,?) "
                "ON CONFLICT(name) DO UPDATE SET digest=excluded.digest, size=excluded.size, "
                "updated_at=excluded.updated_at",
                (name, digest, len(data), now()),
            )
            if old is not None and old[0] != digest and old[0] in self._document_only:
                # (stored by this object for a document, and by nothing since: no other document,
                # exchange or page can name it, so it goes as `archive gc` would remove it)
                self._document_only.discard(old[0])
                self._known_blobs.discard(old[0])
                self.conn.execute("DELETE FROM blobs WHERE digest=?", (old[0],))
            if new_blob:
                self._document_only.add(digest)
        return digest

    def get_document(self, name: str):
        row = self.conn.execute("SELECT digest FROM documents WHERE name=?", (name,)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path}: no document named {name!r}")
        return json.loads(self.get_blob(row[0]))

    def document_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM documents ORDER BY name")]


def extra_of(row: sqlite3.Row) -> dict:
    raw = row["extra"]
    return json.loads(raw) if raw else {}


def _damaged(exc: sqlite3.Error) -> bool:
    """Whether SQLite's error says the file is a damaged database (cut short, overwritten in part)."""
    return "malformed" in str(exc)


