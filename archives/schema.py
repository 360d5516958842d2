"""The archive's SQLite schema (docs/archive-format.md): its tables, indexes and the statements
that write them. Private to the archives package: every other stage reads typed records."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils

FORMAT_NAME = "webfreeze-archive"
FORMAT_VERSION = 1

EXCHANGE_COLUMNS = ("session_id", "captured_at", "method", "url", "surt", "body_key", "status", "reason", "mime",
                    "http_version", "kind", "req_headers", "req_body", "req_body_size", "resp_headers", "payload",
                    "payload_size", "extra")
INSERT_BLOB = "INSERT OR IGNORE INTO blobs(digest, size, stored_size, codec, data) VALUES (?, ?, ?, ?, ?)"
INSERT_ALIAS = "INSERT OR IGNORE INTO digest_aliases(alias, digest) VALUES (?, ?)"
INSERT_EXCHANGE = (f"INSERT INTO exchanges({', '.join(EXCHANGE_COLUMNS)}) "
                   f"VALUES ({', '.join('?' * len(EXCHANGE_COLUMNS))})")


def _create_schema(db: sqlite_utils.Database) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["blobs"].create(
        {"digest": str, "size": int, "stored_size": int, "codec": str, "data": bytes, "base": str},
        pk="digest",
        not_null={"size", "stored_size", "codec", "data"},
    )
    db["sessions"].create(
        {"id": str, "kind": str, "source": str, "tool": str, "started_at": str, "ended_at": str, "info": str},
        pk="id",
    )
    db["exchanges"].create(
        {
            "id": int,
            "session_id": str,
            "captured_at": str,
            "method": str,
            "url": str,
            "surt": str,
            "body_key": str,
            "status": int,
            "reason": str,
            "mime": str,
            "http_version": str,
            "kind": str,
            "req_headers": bytes,
            "req_body": str,
            "req_body_size": int,
            "resp_headers": bytes,
            "payload": str,
            "payload_size": int,
            "extra": str,
        },
        pk="id",
        not_null={"session_id", "captured_at", "method", "url", "surt", "body_key", "status", "kind",
                  "resp_headers", "payload", "payload_size"},
        foreign_keys=[("session_id", "sessions", "id")],
    )
    ex = db["exchanges"]
    ex.create_index(["method", "url", "body_key", "captured_at"], index_name="ix_exchanges_exact")
    ex.create_index(["surt", "captured_at"], index_name="ix_exchanges_surt")
    db["pages"].create(
        {"id": int, "session_id": str, "url": str, "captured_at": str, "title": str,
         "screenshot": str, "dom": str, "extra": str},
        pk="id",
        not_null={"session_id", "url", "captured_at"},
    )
    db["pages"].create_index(["url", "captured_at"], index_name="ix_pages_url")
    db["documents"].create(
        {"name": str, "digest": str, "size": int, "updated_at": str}, pk="name", not_null={"digest"}
    )
    # Digests other tools use for a payload (WARC-Payload-Digest), so revisits resolve to our blob.
    db["digest_aliases"].create({"alias": str, "digest": str}, pk="alias", not_null={"digest"})
