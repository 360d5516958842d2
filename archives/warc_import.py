"""Importing WARC (1.0/1.1, plain, gzip, per-record gzip) and ARC files, read by warcio.

Request records are paired with their responses (by WARC-Concurrent-To, else by URL and date);
revisit records resolve to the original payload by WARC-Payload-Digest (URL-agnostic revisits
included) or by WARC-Refers-To. Every record is checked: declared digests, declared lengths,
gzip integrity and decompression ratio. Any problem fails the whole import (see ``importer``).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import ChunkedDataReader
from warcio.exceptions import ArchiveLoadFailed

from webfreeze.common.http import header_value, is_event_stream

from . import gzip_members
from .errors import ArchiveError, BadInput
from .store import Archive, Exchange, extra_of
from .timeutil import normalize_time
from .urlkey import surt_key

# The WARC-Truncated value (WARC 1.1, 5.13) of a response recorded while its server-sent events still
# came (``extra.open_stream``: a page kept the stream open); an import takes it back for such a stream.
OPEN_STREAM_TRUNCATED = "disconnect"


def open_stream(truncated: str | None, headers) -> bool:
    """Whether a response record with ``WARC-Truncated: truncated`` and HTTP ``headers`` is an event
    stream recorded as it stood (``extra.open_stream``)."""
    return ((truncated or "").strip().lower() == OPEN_STREAM_TRUNCATED
            and is_event_stream(header_value(headers, "content-type")))

CHUNK = 1 << 20
# A record that expands past BOMB_MIN_BYTES at more than BOMB_RATIO times the compressed bytes
# read so far is treated as a decompression bomb.
BOMB_MIN_BYTES = 64 << 20
BOMB_RATIO = 200


def _at_end(counter: "CountingReader") -> bool:
    """Whether the file under ``counter`` has been read to its end (a record failing there is most
    likely cut short)."""
    try:
        return counter.fh.read(1) == b""
    except Exception:
        return False


class CountingReader(io.RawIOBase):
    """Wraps a binary file, counting the compressed bytes consumed (for progress and bomb checks)."""

    def __init__(self, fh, on_progress: Callable[[int], None] | None = None):
        self.fh = fh
        self.count = 0
        self.on_progress = on_progress

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.count += len(data)
        if self.on_progress and data:
            self.on_progress(len(data))
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        return self.count


@dataclass
class ImportStats:
    exchanges: int = 0
    requests_paired: int = 0
    revisits: int = 0
    resources: int = 0
    warnings: int = 0
    websockets: int = 0  # WebSocket conversations stored (a HAR's _webSocketMessages)
    skipped: dict = field(default_factory=dict)
    unresolved_revisits: list = field(default_factory=list)

    def skip(self, kind: str) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + 1


def _http_headers(record) -> list[tuple[str, str]]:
    return [(k, v) for k, v in record.http_headers.headers] if record.http_headers else []


def decode_transfer(raw: bytes, headers) -> tuple[bytes, bool]:
    """An HTTP body with its transfer coding removed (content coding kept), and whether it changed."""
    te = (header_value(headers, "transfer-encoding") or "").lower()
    if "chunked" in te:
        if not isinstance(raw, bytes):  # a view (the fast import's): BytesIO copies views slowly
            raw = bytes(raw)
        body = ChunkedDataReader(io.BytesIO(raw)).read()
        return body, body != raw
    return raw, False


def status_line_of(record) -> tuple[int, str, str]:
    """(status, reason, protocol) of a response record's HTTP status line."""
    hh = record.http_headers
    protocol = (hh.protocol or "HTTP/1.1").strip()
    line = (hh.statusline or "").strip()
    code, _, reason = line.partition(" ")
    # HTTP's status code is three digits, 100 to 999 (RFC 9110, section 15)
    if len(code) != 3 or not code.isascii() or not code.isdigit() or code[0] == "0":
        raise BadInput(f"malformed HTTP status line {hh.statusline!r} (the status must be 3 digits, 100-999)")
    return int(code), reason, protocol


class WarcImporter:
    """Imports one WARC/ARC stream into an open archive, inside the caller's transaction."""

    def __init__(self, archive: Archive, session_id: str, source_name: str, *, arc_file: bool = False):
        self.archive = archive
        # where rows go: the archive itself, or a BulkWriter in front of it (the fast path)
        self.writer = archive
        self.session_id = session_id
        self.source = source_name
        self.arc_file = arc_file  # ARC records: warcio invents their WARC-Record-ID, so errors name offsets
        self.record_offset = 0  # where the record being read starts in the file (warcio's count)
        self.stats = ImportStats()
        self.by_record_id: dict[str, int] = {}  # WARC-Record-ID of a response -> exchange row id
        self.requests_waiting: dict[str, tuple] = {}  # response record id -> request fields
        self.requests_loose: list[tuple] = []  # requests with no WARC-Concurrent-To
        self.revisits_waiting: list[tuple] = []
        self.warcinfo: list[dict] = []

    # -------------------------------------------------------------- reading a record safely
    def _read_block(self, record, counter: CountingReader, stream=None) -> bytes:
        """Read the rest of a record's content, enforcing the bomb limit and declared length."""
        src = stream if stream is not None else record.raw_stream
        parts = []
        total = 0
        start_in = counter.count
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            consumed = max(counter.count - start_in, 1)
            if total > BOMB_MIN_BYTES and total > BOMB_RATIO * consumed:
                raise BadInput(
                    f"record {self._rid(record)} expands to over {total >> 20} MiB from "
                    f"{consumed} compressed bytes: refusing a likely decompression bomb"
                )
        if stream is None and getattr(record.raw_stream, "limit", 0) > 0:
            raise BadInput(f"record {self._rid(record)} is truncated (Content-Length says more than the file holds)")
        return b"".join(parts)

    def _rid(self, record) -> str:
        """How an error names the record: its WARC-Record-ID; in an ARC file (where warcio makes one
        up at random) its byte offset and URL."""
        h = record.rec_headers
        if self.arc_file:
            url = h.get_header("WARC-Target-URI")
            return f"at byte {self.record_offset}" + (f" ({url})" if url else "")
        return h.get_header("WARC-Record-ID") or h.get_header("WARC-Target-URI") or "?"

    def _check_digest(self, record) -> None:
        checker = record.digest_checker
        if checker is not None and checker.passed is False:
            problems = "; ".join(checker.problems) or "digest mismatch"
            raise BadInput(f"record {self._rid(record)}: {problems}")

    # -------------------------------------------------------------- the import loop
    def run(self, fh, on_progress: Callable[[int], None] | None = None, *, whole_gzip: bool = False) -> ImportStats:
        """Import every record of ``fh``.

        ``whole_gzip``: the file is one gzip member holding many records (``gzip file.warc``), which
        warcio refuses on its own because it cannot seek to a record inside it; an import never
        needs to seek, so it reads the decompressed stream.
        """
        counter = CountingReader(fh, on_progress)
        buffered = io.BufferedReader(counter, buffer_size=CHUNK)
        if whole_gzip:
            buffered = io.BufferedReader(gzip.GzipFile(fileobj=buffered, mode="rb"), buffer_size=CHUNK)
        # warcio reports tolerable oddities (a missing blank line after a record) on stderr;
        # collect them as warnings of this import instead of letting them interleave with output.
        noise = io.StringIO()
        it = None
        try:
            with contextlib.redirect_stderr(noise):
                it = ArchiveIterator(buffered, arc2warc=True, check_digests=True)
                for record in it:
                    self.record_offset = it.offset  # (get_record_offset() would read the record to its end)
                    self._one(record, counter)
        except ArchiveLoadFailed as exc:
            self._check_gzip(fh, whole_gzip)  # a cut-off file often reads as something odd: say so
            first = str(exc).strip().splitlines()[0]
            if "\\x1f\\x8b" in first or "\x1f\x8b" in first:  # warcio read a gzip header as text
                raise BadInput("corrupt gzip data: a member does not inflate (damaged bytes or checksum)") from None
            raise BadInput(f"not a valid WARC/ARC file: {first}") from None
        except (zlib.error, EOFError, gzip.BadGzipFile) as exc:
            raise BadInput(f"corrupt or truncated gzip data: {exc}") from None
        except (ValueError, IndexError, KeyError, AttributeError, TypeError, OverflowError) as exc:
            # warcio meets some malformed headers (no WARC-Target-URI on a response), and a file cut
            # inside a record's head, with these: say where, and what it most likely is
            where = f" at byte {it.offset}" if it is not None else ""
            if isinstance(exc, (ValueError, OverflowError)):  # a value warcio could not take (a length)
                raise BadInput(f"malformed record{where}: {exc}") from None
            if _at_end(counter):  # a header missing because the head was cut short
                raise BadInput(f"the file ends inside the record{where}: it is truncated") from None
            raise BadInput(f"malformed record{where}: its headers cannot be parsed") from None
        self._check_gzip(fh, whole_gzip)
        if counter.count == 0:
            raise BadInput("empty file")
        # (a file of revisits only is fine: their originals may come in a later file of this import;
        # those never found are reported as unresolved)
        if self.stats.exchanges == 0 and not self.warcinfo and not self.stats.skipped and not self.revisits_waiting:
            raise BadInput("no WARC or ARC records found")
        self.stats.warnings += sum(1 for line in noise.getvalue().splitlines() if "WARNING" in line)
        return self.stats

    @staticmethod
    def _check_gzip(fh, whole_gzip: bool) -> None:
        """Fail when the file's gzip members do not all end (warcio stops quietly where a cut-off
        file does; see ``gzip_members.check_complete``). A file gzipped as a whole is read through
        ``gzip``, which checks its end already."""
        if whole_gzip or not fh.seekable():
            return
        try:
            gzip_members.check_complete(fh)
        except gzip_members.Unusual as exc:
            raise BadInput(str(exc)) from None
        except OSError as exc:
            raise BadInput(f"cannot read the file again to check its gzip data: {exc}") from None

    def _one(self, record, counter: CountingReader) -> None:
        rtype = record.rec_type
        if not rtype:
            raise BadInput(f"record {self._rid(record)} has no valid WARC-Type header (malformed WARC headers)")
        length = record.rec_headers.get_header("Content-Length")
        if length is None or not length.strip().isdigit():
            if length is None and _at_end(counter):  # a head cut short before its Content-Length
                who = self._rid(record)
                who = f"the record at byte {self.record_offset}" if who == "?" else f"record {who}"
                raise BadInput(f"the file ends inside {who}: it is truncated")
            raise BadInput(f"record {self._rid(record)} has a malformed Content-Length {length!r}")
        if rtype == "response":
            self._response(record, counter)
        elif rtype == "request":
            self._request(record, counter)
        elif rtype == "revisit":
            self._revisit(record, counter)
        elif rtype == "resource":
            self._resource(record, counter)
        elif rtype == "warcinfo":
            body = self._read_block(record, counter)
            self._check_digest(record)
            # (an ARC file's header has no record id: warcio's would be made up, a new one each run)
            self.warcinfo.append({"record_id": None if self.arc_file else self._rid(record),
                                  "fields": body.decode("utf-8", "replace")})
        else:  # metadata, conversion, continuation: nothing to replay
            self._read_block(record, counter)
            self._check_digest(record)
            self.stats.skip(rtype)

    def _common(self, record) -> tuple[str, str, dict]:
        h = record.rec_headers
        url = h.get_header("WARC-Target-URI")
        if not url:
            raise BadInput(f"record {self._rid(record)} has no WARC-Target-URI")
        date = h.get_header("WARC-Date")
        if not date:
            raise BadInput(f"record {self._rid(record)} has no WARC-Date")
        try:
            when = normalize_time(date)
        except ArchiveError:
            raise BadInput(f"record {self._rid(record)} has a malformed WARC-Date {date!r}") from None
        extra = {}
        ip = h.get_header("WARC-IP-Address")
        if ip:
            extra["ip"] = ip
        return url, when, extra

    def _payload(self, record, counter: CountingReader, headers) -> tuple[bytes, bool]:
        """The entity body with transfer coding removed (content coding kept)."""
        raw = self._read_block(record, counter)
        self._check_digest(record)
        return decode_transfer(raw, headers)

    def _response(self, record, counter: CountingReader) -> None:
        url, when, extra = self._common(record)
        hh = record.http_headers
        if not hh or not (hh.protocol or "").upper().startswith("HTTP/"):
            if url.lower().startswith(("http:", "https:")):
                raise BadInput(f"record {self._rid(record)}: the response for {url} does not start with an "
                               "HTTP status line")
            # A response for another scheme (dns:, whois:): keep its block as a resource.
            return self._resource(record, counter)
        headers = self._headers_of(record)
        status, reason, protocol = status_line_of(record)
        payload, dechunked = self._payload(record, counter, headers)
        if dechunked:
            extra["dechunked"] = True
        if open_stream(record.rec_headers.get_header("WARC-Truncated"), headers):
            extra["open_stream"] = True
        self._store(record, url, when, extra, status, reason, protocol, headers, payload, "response")

    def _store(self, record, url, when, extra, status, reason, protocol, headers, payload, kind) -> int:
        """Store one exchange; ``payload`` is the body, or the digest of a stored blob (revisits)."""
        ex = Exchange(url=url, captured_at=when, status=status, reason=reason, http_version=protocol,
                      resp_headers=headers, kind=kind, extra=extra, session_id=self.session_id)
        ex.payload_digest = payload if isinstance(payload, str) else self._put_payload(record, payload)
        ex_id = self._add_exchange(record, ex)
        self.stats.exchanges += 1
        wdigest = record.rec_headers.get_header("WARC-Payload-Digest")
        if wdigest and record.rec_type != "revisit":
            self.writer.add_alias(wdigest.strip(), ex.payload_digest)
        rid = record.rec_headers.get_header("WARC-Record-ID")
        if rid:
            self.by_record_id[rid] = ex_id
            waiting = self.requests_waiting.pop(rid, None)
            if waiting:
                self._attach(ex_id, *waiting)
        return ex_id

    def _headers_of(self, record) -> list[tuple[str, str]]:
        """The HTTP header list of a record (it has an HTTP head)."""
        return _http_headers(record)

    def _add_exchange(self, record, ex: Exchange) -> int:
        return self.writer.add_exchange(ex)

    def _put_payload(self, record, payload: bytes) -> str:
        """Store the payload of ``record`` as a blob and return its digest."""
        return self.writer.put_blob(payload)

    def _resource(self, record, counter: CountingReader) -> None:
        url, when, extra = self._common(record)
        body = self._read_block(record, counter)
        self._check_digest(record)
        ctype = record.rec_headers.get_header("Content-Type") or "application/octet-stream"
        headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
        self.stats.resources += 1
        self._store(record, url, when, extra, 200, "OK", "HTTP/1.1", headers, body, "resource")

    def _request(self, record, counter: CountingReader) -> None:
        url, when, _ = self._common(record)
        body = self._read_block(record, counter)
        self._check_digest(record)
        if not record.http_headers:
            self.stats.skip("request without HTTP headers")
            return
        method = (record.http_headers.protocol or "GET").split(" ")[0].upper()
        headers = self._headers_of(record)
        body, _ = decode_transfer(body, headers)
        fields = (method, headers, body or None)
        target = record.rec_headers.get_header("WARC-Concurrent-To")
        if target and target in self.by_record_id:
            self._attach(self.by_record_id[target], *fields)
        elif target:
            self.requests_waiting[target] = fields
        else:
            self.requests_loose.append((url, when) + fields)

    def _attach(self, ex_id: int, method: str, headers, body) -> None:
        self.writer.set_request(ex_id, method, headers, body)
        self.stats.requests_paired += 1

    def _revisit(self, record, counter: CountingReader) -> None:
        url, when, extra = self._common(record)
        self._read_block(record, counter)  # a revisit carries at most HTTP headers
        h = record.rec_headers
        ref = {
            "payload_digest": (h.get_header("WARC-Payload-Digest") or "").strip(),
            "refers_to_uri": h.get_header("WARC-Refers-To-Target-URI"),
            "refers_to_date": h.get_header("WARC-Refers-To-Date"),
            "refers_to": h.get_header("WARC-Refers-To"),
        }
        # Provenance kept small: that this was a revisit, and of which URL when it is another one.
        extra["revisit"] = ref["refers_to_uri"] if ref["refers_to_uri"] and ref["refers_to_uri"] != url else True
        headers = self._headers_of(record) if record.http_headers else None
        status_line = status_line_of(record) if record.http_headers else None
        if not self._resolve_revisit(record, url, when, extra, ref, headers, status_line):
            self.revisits_waiting.append((record.rec_headers, url, when, extra, ref, headers, status_line))

    def resolve_alias(self, alias: str) -> str | None:
        """The blob another tool's payload digest names, if it is stored."""
        return self.archive.resolve_alias(alias)

    def find_original(self, ref: dict, digest: str | None):
        """The exchange a revisit refers to, or None while it is not (yet) in the archive.

        Only an exact match counts: same WARC-Refers-To record, or same target URL and (when
        given) the same date and payload. Guessing from a near match would silently attach the
        wrong body; the caller retries once every source of the import has been read.
        """
        if ref["refers_to"] and ref["refers_to"] in self.by_record_id:
            return self.archive.exchange_row(self.by_record_id[ref["refers_to"]])
        target = ref["refers_to_uri"]
        if target:
            # the first capture in (captured_at, id) order of that URL (and date and payload, if given)
            sql, params = "SELECT * FROM exchanges WHERE surt=? AND url=?", [surt_key(target), target]
            if ref["refers_to_date"]:
                sql += " AND captured_at=?"
                params.append(normalize_time(ref["refers_to_date"]))
            if digest:
                sql += " AND payload=?"
                params.append(digest)
            row = self.archive.conn.execute(sql + " ORDER BY captured_at, id LIMIT 1", params).fetchone()
            if row is not None:
                return row
        if digest:
            return self.archive.conn.execute("SELECT * FROM exchanges WHERE payload=? ORDER BY id LIMIT 1",
                                             (digest,)).fetchone()
        return None

    def _resolve_revisit(self, record, url, when, extra, ref, headers, status_line) -> bool:
        digest = self.resolve_alias(ref["payload_digest"]) if ref["payload_digest"] else None
        original = self.find_original(ref, digest)
        if original is None:
            return False
        if headers is None or (status_line and status_line[0] == 304):
            headers = self.archive.row_headers(original, "resp_headers")
            status, reason, protocol = original["status"], original["reason"], original["http_version"]
        else:
            status, reason, protocol = status_line
        payload = original["payload"]
        if extra_of(original).get("dechunked") and "chunked" in (header_value(headers, "transfer-encoding") or "").lower():
            extra["dechunked"] = True
        self.stats.revisits += 1
        self._store(record, url, when, extra, status, reason, protocol, headers, payload, original["kind"])
        return True

    def retry_revisits(self) -> bool:
        """Try the revisits whose original was not yet known; True when any resolved.

        Called after every source of an import has been read, so a revisit may point into
        another file of the same import (or an earlier import into the same archive).
        """
        waiting, self.revisits_waiting = self.revisits_waiting, []
        for item in waiting:
            rec_headers, url, when, extra, ref, headers, status_line = item
            if not self._resolve_revisit(_HeadersOnly(rec_headers), url, when, extra, ref, headers, status_line):
                self.revisits_waiting.append(item)
        return len(self.revisits_waiting) < len(waiting)

    def finish(self) -> None:
        """Record what could not be resolved and pair requests that named no response."""
        self.stats.unresolved_revisits.extend(item[1] for item in self.revisits_waiting)
        # Requests that named no response: pair with a response of the same URL and date.
        for url, when, method, headers, body in self.requests_loose:
            row = self.archive.conn.execute(
                "SELECT id FROM exchanges WHERE session_id=? AND url=? AND req_headers IS NULL "
                "ORDER BY abs(julianday(captured_at) - julianday(?)), id LIMIT 1",
                (self.session_id, url, when),
            ).fetchone()
            if row:
                self._attach(row[0], method, headers, body)
            else:
                self.stats.skip("unpaired request")
        for _ in self.requests_waiting:
            self.stats.skip("unpaired request")


class _HeadersOnly:
    """Just enough of a warcio record for deferred revisits (their content was already read)."""

    rec_type = "revisit"

    def __init__(self, rec_headers):
        self.rec_headers = rec_headers
