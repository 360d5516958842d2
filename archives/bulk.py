"""The bulk writer of imports: rows and blobs buffered and written with one ``executemany`` each."""

from __future__ import annotations

from . import blobs
from .errors import ArchiveError
from .schema import EXCHANGE_COLUMNS, INSERT_ALIAS, INSERT_BLOB
from .store import Archive, Exchange, Headers
from .timeutil import normalize_time

# Positions in a BulkWriter row (``id`` first, then EXCHANGE_COLUMNS) of the request-side columns.
_REQUEST_SLOTS = [1 + EXCHANGE_COLUMNS.index(c) for c in ("method", "req_headers", "req_body", "req_body_size",
                                                          "body_key")]
_COLUMNS_WITH_ID = ("id", *EXCHANGE_COLUMNS)
KEEP_ROWS = 200_000  # rows a BulkWriter keeps for lookups (a few hundred bytes each)
_INSERT_EXCHANGE_WITH_ID = (f"INSERT INTO exchanges(id, {', '.join(EXCHANGE_COLUMNS)}) "
                            f"VALUES ({', '.join('?' * (1 + len(EXCHANGE_COLUMNS)))})")


class BulkWriter:
    """The writes of an import (exchanges, blobs, digest aliases), buffered and sent to SQLite with
    one ``executemany`` per table: the same rows as ``Archive``'s one-row methods, for less work.

    Exchange rows get explicit ids, the ones SQLite would have given them (``max(id) + 1`` onwards),
    so a caller can refer to a row (attach its request) before it is written. Use it inside the
    archive's write transaction as the only writer meanwhile, and :meth:`flush` before reading the
    tables it writes; a rolled-back transaction discards what it holds like any other write.
    """

    def __init__(self, arc: Archive):
        arc.require_write()
        self.arc = arc
        self.next_id = arc.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM exchanges").fetchone()[0]
        self.rows: dict[int, list] = {}
        self.blobs: list[tuple] = []
        self.sizes: dict[str, int] = {}  # digest -> size of the blobs this writer has stored
        self.blob_bytes = 0  # stored bytes in ``blobs``
        self.aliases: list[tuple[str, str]] = []
        self._times: dict[str, str] = {}
        # What this writer has stored, kept for lookups without flushing and querying (an import's
        # revisits look for their originals): rows by id, first id per payload, ids per URL, aliases.
        # ``first_id`` splits the table: below it the rows are older and all in the database.
        self.first_id = self.next_id
        self.kept: dict[int, list] = {}
        self.kept_complete = True  # False once KEEP_ROWS was reached: lookups must query then
        self.by_payload: dict[str, int] = {}
        self.by_url: dict[str, list[int]] = {}
        self.alias_map: dict[str, str] = {}

    def put_blob(self, data: bytes) -> str:
        """:meth:`Archive.put_blob`, buffered."""
        digest = blobs.digest_of(data)
        arc = self.arc
        if arc.claim_blob(digest):
            return digest
        if arc.conn.execute("SELECT 1 FROM blobs WHERE digest=?", (digest,)).fetchone() is None:
            codec, stored = blobs.encode(data)
            return self.put_encoded_blob(digest, len(data), codec, stored)
        arc.remember_blob(digest)
        return digest

    def put_encoded_blob(self, digest: str, size: int, codec: str, stored: bytes) -> str:
        """:meth:`Archive.put_encoded_blob`, buffered."""
        if not self.arc.claim_blob(digest):
            self.blobs.append((digest, size, len(stored), codec, stored))
            self.blob_bytes += len(stored)
            if len(self.sizes) > 200_000:
                self.sizes.clear()
            self.sizes[digest] = size
            self.arc.remember_blob(digest)
        return digest

    def add_alias(self, alias: str, digest: str) -> None:
        """:meth:`Archive.add_alias`, buffered."""
        self.aliases.append((alias, digest))
        if self.kept_complete:
            self.alias_map.setdefault(alias, digest)  # the first one stays, as INSERT OR IGNORE keeps it

    def kept_row(self, exchange_id: int) -> dict | None:
        """A row this writer stored (column name -> value, as a row read back would give), or None."""
        row = self.kept.get(exchange_id)
        return None if row is None else dict(zip(_COLUMNS_WITH_ID, row))

    def add_exchange(self, ex: Exchange, resp_headers: bytes | None = None) -> int:
        """:meth:`Archive.add_exchange`, buffered. ``resp_headers``: the header list already encoded
        (:meth:`Archive.encode_headers`), or else a header list's ``encoded`` attribute is used when
        it has one."""
        if not ex.session_id:
            raise ArchiveError("an exchange needs a capture session")
        arc = self.arc
        if ex.payload_digest and ex.payload_digest in self.sizes:
            payload, payload_size = ex.payload_digest, self.sizes[ex.payload_digest]
        elif ex.payload_digest:
            payload, payload_size = arc.store_payload(ex)
        else:
            payload, payload_size = self.put_blob(ex.payload), len(ex.payload)
        req_digest = self.put_blob(ex.req_body) if ex.req_body else None
        when = self._times.get(ex.captured_at)
        if when is None:
            when = normalize_time(ex.captured_at)
            if len(self._times) < 100_000:
                self._times[ex.captured_at] = when
        ex_id = self.next_id
        self.next_id += 1
        if resp_headers is None:
            resp_headers = getattr(ex.resp_headers, "encoded", None)
        row = arc.exchange_values(ex, payload, payload_size, req_digest, captured_at=when, resp_headers=resp_headers)
        row.insert(0, ex_id)
        self.rows[ex_id] = row
        if self.kept_complete:
            if len(self.kept) >= KEEP_ROWS:
                self.kept_complete = False
                self.kept, self.by_payload, self.by_url, self.alias_map = {}, {}, {}, {}
            else:
                self.kept[ex_id] = row
                self.by_payload.setdefault(payload, ex_id)
                self.by_url.setdefault(ex.url, []).append(ex_id)
        return ex_id

    def set_request(self, exchange_id: int, method: str, req_headers: Headers, req_body: bytes | None,
                    encoded: bytes | None = None) -> None:
        """:meth:`Archive.set_request`, buffered; ``encoded``: ``req_headers`` already encoded."""
        row = self.rows.get(exchange_id)
        if row is None:  # written already
            self.flush()
            self.arc.set_request(exchange_id, method, req_headers, req_body)
            return
        req_digest = self.put_blob(req_body) if req_body else None
        if encoded is None:
            encoded = getattr(req_headers, "encoded", None)
        for slot, value in zip(_REQUEST_SLOTS, self.arc.request_values(method, req_headers, req_body, req_digest,
                                                                       encoded)):
            row[slot] = value

    def flush(self) -> None:
        """Write what is buffered."""
        if not (self.blobs or self.rows or self.aliases):
            return
        conn = self.arc.conn
        with self.arc.transaction():
            if self.blobs:
                conn.executemany(INSERT_BLOB, self.blobs)
            if self.rows:
                conn.executemany(_INSERT_EXCHANGE_WITH_ID, self.rows.values())
            if self.aliases:
                conn.executemany(INSERT_ALIAS, self.aliases)
        self.blobs, self.rows, self.aliases = [], {}, []
        self.blob_bytes = 0
        self.arc.write_ahead()
