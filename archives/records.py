"""Typed records read back from an archive: what :meth:`Archive.exchanges`, :meth:`Archive.pages`
and :meth:`Archive.documents` yield (in warcio's spirit: iterate, then ask a record for its parts).

A record holds its index row and the open archive it came from; headers and bytes are read and
decoded when asked for, so iterating a large archive for its URLs costs no payload reads. Every
record has ``payload()`` (the bytes as stored) and ``body()`` (decoded: content coding removed for
an HTTP response, text for a DOM snapshot, the JSON value for a document). A record is valid while
its archive is open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from webfreeze.common.http import header_value

from .content import DecodeError, content_encoding, decode_content
from .errors import ArchiveError

if TYPE_CHECKING:
    from .store import Archive, Exchange, Headers


class IndexEntry(NamedTuple):
    """The index columns of one exchange, without headers or bytes: what request matching needs."""

    id: int
    method: str
    url: str
    body_key: str
    captured_at: str
    session_id: str
    mime: str
    status: int = 200


@dataclass(frozen=True)
class Request:
    """The request side of an exchange (``headers`` is empty when the request was not captured)."""

    method: str
    url: str
    body_key: str
    body_digest: str | None
    body_size: int
    _record: "ExchangeRecord"

    @property
    def headers(self) -> "Headers":
        return self._record._request_headers

    @property
    def captured(self) -> bool:
        """Whether the request's headers were captured (imports of responses alone have none)."""
        return self._record._row["req_headers"] is not None

    def header(self, name: str) -> str | None:
        """First value of header ``name`` (case-insensitive), or None."""
        return header_value(self.headers, name)

    def payload(self) -> bytes:
        """The request body as sent (``b""`` when there is none)."""
        return self._record._arc.get_blob(self.body_digest) if self.body_digest else b""

    def body(self) -> bytes:
        """The request body with its content coding removed (rare for requests; same as payload otherwise)."""
        return _decoded(self._record, self.payload(), self.headers)


@dataclass(frozen=True)
class Response:
    """The response side of an exchange."""

    status: int
    reason: str
    http_version: str
    mime: str
    payload_digest: str
    payload_size: int
    _record: "ExchangeRecord"

    @property
    def headers(self) -> "Headers":
        return self._record._response_headers

    def header(self, name: str) -> str | None:
        """First value of header ``name`` (case-insensitive), or None."""
        return header_value(self.headers, name)

    def payload(self, *, verify: bool = False) -> bytes:
        """The response entity as the server sent it (transfer coding removed, content coding kept);
        ``verify`` recomputes its SHA-256 (see :meth:`Archive.get_blob`)."""
        return self._record._arc.get_blob(self.payload_digest, verify=verify)

    def body(self) -> bytes:
        """The response entity with its content coding (gzip, br, deflate, zstd) removed."""
        return _decoded(self._record, self.payload(), self.headers)


def _decoded(record, data: bytes, headers) -> bytes:
    try:
        return decode_content(data, content_encoding(headers))
    except DecodeError as exc:
        raise ArchiveError(f"{record.archive.path}: exchange {record.id} ({record.url}): {exc}") from None


class ExchangeRecord:
    """One stored HTTP exchange: ``.request``, ``.response``, ``.headers`` (the response's),
    ``.payload()`` (raw) and ``.body()`` (decoded), plus where and when it was captured."""

    __slots__ = ("_arc", "_row", "__dict__")

    def __init__(self, arc: "Archive", row):
        self._arc = arc
        self._row = row

    @property
    def archive(self) -> "Archive":
        """The archive the exchange is stored in."""
        return self._arc

    # identity and index
    @property
    def id(self) -> int:
        return self._row["id"]

    @property
    def url(self) -> str:
        return self._row["url"]

    @property
    def method(self) -> str:
        return self._row["method"]

    @property
    def status(self) -> int:
        return self._row["status"]

    @property
    def captured_at(self) -> str:
        return self._row["captured_at"]

    @property
    def session_id(self) -> str:
        return self._row["session_id"]

    @property
    def kind(self) -> str:
        """``response`` (HTTP) or ``resource`` (no HTTP envelope)."""
        return self._row["kind"]

    @property
    def surt(self) -> str:
        return self._row["surt"]

    @property
    def body_key(self) -> str:
        return self._row["body_key"] or ""

    @property
    def mime(self) -> str:
        return (self._row["mime"] or "").lower()

    @cached_property
    def extra(self) -> dict:
        """Protocol details kept for exact replay and re-export (JSON)."""
        raw = self._row["extra"]
        return json.loads(raw) if raw else {}

    # the two sides
    @cached_property
    def request(self) -> Request:
        r = self._row
        return Request(r["method"], r["url"], r["body_key"] or "", r["req_body"], r["req_body_size"] or 0, self)

    @cached_property
    def response(self) -> Response:
        r = self._row
        return Response(r["status"], r["reason"] or "", r["http_version"] or "HTTP/1.1", (r["mime"] or "").lower(),
                        r["payload"], r["payload_size"], self)

    @cached_property
    def _request_headers(self) -> "Headers":
        return self._arc.decode_headers(self._row["req_headers"])

    @cached_property
    def _response_headers(self) -> "Headers":
        return self._arc.decode_headers(self._row["resp_headers"])

    @property
    def headers(self) -> "Headers":
        """The response's headers."""
        return self._response_headers

    def payload(self, *, verify: bool = False) -> bytes:
        """The response payload as stored (content coding kept)."""
        return self.response.payload(verify=verify)

    def body(self) -> bytes:
        """The response payload decoded (content coding removed)."""
        return self.response.body()

    def to_exchange(self, **changes) -> "Exchange":
        """This record as a writable :class:`Exchange` (bytes read now), e.g. to copy it into another
        archive; ``changes`` replace fields (``url=``, ``captured_at=``, ``session_id=``...)."""
        from .store import Exchange

        req = self.request
        fields = dict(
            url=self.url, captured_at=self.captured_at, status=self.status, resp_headers=list(self.headers),
            payload=self.payload(), method=self.method,
            req_headers=list(req.headers) if req.captured else None,
            req_body=req.payload() if req.body_digest else None, reason=self.response.reason,
            http_version=self.response.http_version, kind=self.kind, extra=dict(self.extra),
            session_id=self.session_id)
        fields.update(changes)
        return Exchange(**fields)

    def __repr__(self) -> str:
        return f"<ExchangeRecord {self.id} {self.method} {self.url} {self.status} {self.captured_at}>"


class PageRecord:
    """One page record (a crawl's or a session's page): URL, title, time, ``extra`` (final URL,
    status, depth, screenshot kind), the DOM snapshot (``payload()`` raw, ``body()`` as text,
    ``dom()`` bytes or None) and the screenshot (``screenshot()``: image bytes or None; lossless WebP
    in records made by crawls since WebP screenshots came in, PNG in earlier ones and where WebP
    cannot hold the image: :attr:`screenshot_format` says which)."""

    __slots__ = ("_arc", "_row", "__dict__")

    def __init__(self, arc: "Archive", row):
        self._arc = arc
        self._row = row

    id = property(lambda self: self._row["id"])
    session_id = property(lambda self: self._row["session_id"])
    url = property(lambda self: self._row["url"])
    captured_at = property(lambda self: self._row["captured_at"])
    title = property(lambda self: self._row["title"] or "")
    dom_digest = property(lambda self: self._row["dom"])
    screenshot_digest = property(lambda self: self._row["screenshot"])

    @cached_property
    def extra(self) -> dict:
        raw = self._row["extra"]
        return json.loads(raw) if raw else {}

    def dom(self) -> bytes | None:
        return self._arc.get_blob(self.dom_digest) if self.dom_digest else None

    def screenshot(self) -> bytes | None:
        """The screenshot's bytes as stored (WebP or PNG: :attr:`screenshot_format`), or None."""
        return self._arc.get_blob(self.screenshot_digest) if self.screenshot_digest else None

    @property
    def screenshot_format(self) -> str | None:
        """``webp`` or ``png`` (from the image's first bytes), None without a screenshot."""
        data = self.screenshot()
        if not data:
            return None
        return "webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else "png"

    def payload(self) -> bytes:
        """The DOM snapshot's bytes (``b""`` when the page has none)."""
        return self.dom() or b""

    def body(self) -> str:
        """The DOM snapshot as text."""
        return self.payload().decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"<PageRecord {self.id} {self.url} {self.captured_at}>"


class DocumentRecord:
    """One named JSON document (task suite, ground truth, trajectory, crawl state): ``payload()``
    its JSON bytes, ``body()`` the decoded value."""

    __slots__ = ("_arc", "_row")

    def __init__(self, arc: "Archive", row):
        self._arc = arc
        self._row = row

    name = property(lambda self: self._row["name"])
    digest = property(lambda self: self._row["digest"])
    size = property(lambda self: self._row["size"])
    updated_at = property(lambda self: self._row["updated_at"])

    def payload(self) -> bytes:
        return self._arc.get_blob(self.digest)

    def body(self):
        return json.loads(self.payload())

    def __repr__(self) -> str:
        return f"<DocumentRecord {self.name} {self.size} bytes>"
