"""The fast path of ``archive import`` for well-formed WARC 1.0/1.1 files.

Per-record gzip files (the usual kind) are inflated on worker threads (``gzip_members``) and each
member's record is read here; plain files are read by FastWARC. Worker threads then verify
digests, hash and compress, and the records are stored through ``WarcImporter``'s own logic.

This path only ever *accepts* input: every record must pass checks at least as strict as warcio's,
and on anything unusual (a digest that does not match as written, an odd header, a framing doubt, a
huge record) it raises :class:`Fallback`. The caller then undoes this file's writes (a savepoint)
and imports it again with warcio, whose verdict and error messages are the reference. So the
outcome of an import is warcio's in every case; only well-formed files get faster.

Work per record is split so that two cores help: the main thread (which holds Python's GIL) parses
and stores, while a small thread pool runs the GIL-free parts (inflating, SHA-1 digest checks,
SHA-256 keys, zstd) for batches of records. Records are stored strictly in file order, so row ids,
pairing and revisit resolution match the warcio path.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import threading
from collections import deque
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import blobs, gzip_members
from .bulk import BulkWriter
from .errors import BadInput
from .schema import EXCHANGE_COLUMNS
from .store import Archive, Exchange, header_compressor, headers_json
from .timeutil import normalize_time
from .urlkey import surt_key
from .warc_import import BOMB_MIN_BYTES, ImportStats, WarcImporter, decode_transfer, open_stream, status_line_of

try:  # an optional accelerator: without it every import takes the warcio path
    from fastwarc.warc import ArchiveIterator as _FastIterator
    from fastwarc.warc import is_warc_10, is_warc_11
except ImportError:  # pragma: no cover - fastwarc is a base dependency
    _FastIterator = None

# Positions in a BulkWriter row (``id`` first) of the columns a revisit's lookup compares.
_CAPTURED_AT = 1 + EXCHANGE_COLUMNS.index("captured_at")
_PAYLOAD = 1 + EXCHANGE_COLUMNS.index("payload")
# A batch of records handed to a worker: big enough that hand-over costs little per record.
BATCH_BYTES = 512 << 10
BATCH_RECORDS = 64
MAX_IN_FLIGHT = 4
# gzip batches being inflated ahead of the one being parsed
INFLATE_AHEAD = 3
WORKERS = 2
# Records larger than this take the warcio path (it streams them and checks for bombs).
MAX_FAST_RECORD = BOMB_MIN_BYTES
# Buffered rows are written once this many, or blobs of this many bytes, are waiting (and whenever
# rows are read back): batches for SQLite, bounded memory, and a file that grows as it goes.
# (A new archive's file is synced to the disk after each flush, on a thread of its own (see
# Archive.write_ahead): the smaller the flushes, the less is left to sync once the import is done.)
FLUSH_ROWS = 512
FLUSH_BYTES = 1 << 20

_HTTP_RECORDS = ("response", "request", "revisit")
_HTTP_VERBS = ("GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "OPTIONS", "CONNECT", "PATCH")
_TYPES = frozenset(["warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion",
                    "continuation"])
_ALGOS = frozenset(["sha1", "sha256", "sha512", "md5"])
_WARC_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_BLANK = b" \t\r\n\x0b\x0c"


class Fallback(Exception):
    """This file needs warcio (odd or bad input); the message says why, for debugging. An internal
    signal, always caught (not a :class:`WebfreezeError`: one that escaped would be a bug)."""


def available() -> bool:
    return _FastIterator is not None


_pool_lock = threading.Lock()
_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}


def workers(role: str = "work") -> ThreadPoolExecutor:
    """The worker threads of ``role``, started on first use and kept for the process (starting
    threads costs a small import more than its records do); a forked child starts its own.

    ``work`` (digests, SHA-256, zstd) has WORKERS threads; ``inflate`` has one of its own, so that
    inflating the next members never waits behind the work queued for the records before them."""
    with _pool_lock:
        entry = _pools.get(role)
        if entry is None or entry[0] != os.getpid():
            entry = _pools[role] = (os.getpid(), ThreadPoolExecutor(WORKERS if role == "work" else 1,
                                                                    thread_name_prefix=f"import-{role}"))
        return entry[1]


# ------------------------------------------------------------------ records as warcio shows them
class _Fields:
    """WARC or HTTP header fields with warcio's case-insensitive ``get_header`` (first match wins)."""

    __slots__ = ("by_name",)

    def __init__(self, pairs):
        d = {}
        for k, v in pairs:
            d.setdefault(k.lower(), v)
        self.by_name = d

    @classmethod
    def of(cls, d: dict) -> "_Fields":
        """Fields from a dict already keyed by lower-case names."""
        f = cls.__new__(cls)
        f.by_name = d
        return f

    def get_header(self, name: str, default=None):
        key = _LOWER.get(name)
        if key is None:
            key = name.lower()
            if len(_LOWER) < 1024:
                _LOWER[name] = key
        return self.by_name.get(key, default)


_LOWER: dict[str, str] = {}


class _HeaderList(list):
    """An HTTP header list as ``(name, value)`` pairs that also carries its stored form once a worker
    has encoded it (``encoded``, read by ``BulkWriter``)."""

    __slots__ = ("encoded",)


class _Http:
    """The parsed HTTP head of a record, shaped like warcio's StatusAndHeaders."""

    __slots__ = ("protocol", "statusline", "headers")

    def __init__(self, protocol: str, statusline: str, headers: list):
        self.protocol = protocol
        self.statusline = statusline
        self.headers = headers


class _Record:
    """One parsed record, duck-typing the parts of a warcio record that ``WarcImporter`` reads."""

    __slots__ = ("rec_type", "rec_headers", "http_headers", "body", "payload", "dechunked", "blob", "http_json",
                 "head_entry")
    format = "warc"

    def __init__(self, rec_type, rec_headers, http_headers, body):
        self.rec_type = rec_type
        self.rec_headers = rec_headers
        self.http_headers = http_headers
        self.body = body  # the block after the HTTP head (the whole block without one)
        self.payload = None  # what gets stored as a blob (transfer coding removed), if anything
        self.dechunked = False
        self.blob = None  # (digest, size, codec, stored) once a worker has encoded ``payload``
        self.http_json = None  # the JSON form of the HTTP header list, for a worker to compress
        self.head_entry = None  # the _RequestHeads entry of a request's HTTP head, to learn its stored form


def _head_end(buf: bytes, base: int, stop: int) -> tuple[int, int]:
    """Where the HTTP head of ``buf[base:stop]`` ends, and where the payload starts."""
    end = buf.find(b"\r\n\r\n", base, stop)
    if end < 0:  # a head that runs to the end of the block (a revisit): warcio reads it to the end
        return (stop - 2 if buf.endswith(b"\r\n", base, stop) else stop), stop
    return end, end + 4


def _parse_http(buf: bytes, request: bool, base: int = 0, stop: int | None = None) -> tuple[_Http, int]:
    """The HTTP head of a block (``buf[base:stop]``) as warcio parses it (non-verifying parser), and
    where the payload starts in ``buf``. Only plain heads are accepted: CRLF line ends, no folded
    lines, ``Name: value`` lines."""
    if stop is None:
        stop = len(buf)
    end, start = _head_end(buf, base, stop)
    try:
        head = buf[base:end].decode("utf-8")
    except UnicodeDecodeError:
        raise Fallback("non-UTF-8 HTTP head") from None
    lines = head.split("\r\n")
    # CR and LF only as line ends: then the lines below are what warcio splits the head into
    if head.count("\r") != len(lines) - 1 or head.count("\n") != len(lines) - 1:
        raise Fallback("odd line ends in HTTP head")
    first = lines[0].rstrip()
    if not first:
        raise Fallback("no HTTP start line")
    headers = _HeaderList()
    for line in lines[1:]:
        # `Name: value` with a name that starts the line (a leading blank would fold it into the last)
        name, sep, value = line.partition(":")
        if not sep or not name or name[0] in " \t":
            raise Fallback("odd header lines in HTTP head")
        headers.append((name.rstrip(" \t"), value.strip()))
    protocol, _, rest = first.partition(" ")
    if request:
        if protocol not in _HTTP_VERBS:
            raise Fallback("unusual request method")
    elif not protocol.upper().startswith("HTTP/"):
        raise Fallback("no HTTP status line")
    return _Http(protocol, rest.strip(), headers), start


class _RequestHeads:
    """The request heads of one file, their header lines parsed once: a crawler sends the same
    request headers over and over (the same client headers for every page; only the request line
    differs), so header lines seen before are taken from here, with their JSON form and, once a
    worker has compressed it, their stored form. An entry holds what ``_parse_http`` and
    ``headers_json`` gave for those exact bytes, and the stored form what a worker gave for that
    JSON (against the one archive's dictionary that this importer writes to)."""

    LIMIT = 4096  # distinct header blocks kept; past it, the others are parsed each time

    def __init__(self):
        self.entries: dict[bytes, list] = {}  # header lines -> [pairs, json, stored or None]

    def parse(self, buf: bytes, base: int, stop: int) -> tuple[_Http, int, list | None]:
        """What ``_parse_http(buf, True, base, stop)`` gives, and the entry of the head's header
        lines (None when not kept)."""
        end, start = _head_end(buf, base, stop)
        line_end = buf.find(b"\r\n", base, end)
        if line_end < 0:  # no header lines: parsed as it is
            http, start = _parse_http(buf, True, base, stop)
            return http, start, None
        key = buf[line_end:end]  # the header lines, each after its CRLF
        entry = self.entries.get(key)
        if entry is None:
            http, start = _parse_http(buf, True, base, stop)
            entry = [tuple(http.headers), headers_json(http.headers), None]
            if len(self.entries) < self.LIMIT:
                self.entries[key] = entry
            return http, start, entry
        # The header lines passed _parse_http's checks before (each check is of one line, or of
        # the CR and LF that are not line ends); the request line is checked here the same way.
        try:
            first = buf[base:line_end].decode("utf-8")
        except UnicodeDecodeError:
            raise Fallback("non-UTF-8 HTTP head") from None
        if "\r" in first or "\n" in first:
            raise Fallback("odd line ends in HTTP head")
        first = first.rstrip()
        if not first:
            raise Fallback("no HTTP start line")
        protocol, _, rest = first.partition(" ")
        if protocol not in _HTTP_VERBS:
            raise Fallback("unusual request method")
        headers = _HeaderList(entry[0])
        if entry[2] is not None:
            headers.encoded = entry[2]
        return _Http(protocol, rest.strip(), headers), start, entry


# ------------------------------------------------------------------ the work done off the GIL
def _digest_matches(value: str, digest: bytes) -> bool:
    """Compare a declared digest value to ``digest`` the way warcio does: base32 as written, or
    base16 / base64 when the value is longer / shorter than base32."""
    b32 = base64.b32encode(digest).decode("ascii")
    if len(value) == len(b32):
        return value == b32
    if len(value) > len(b32):
        return base64.b16decode(value, casefold=True) == digest
    altchars = b"-_" if "-" in value or "_" in value else None
    return base64.b64decode(value, altchars=altchars) == digest


def _check(data, declared: str | None) -> None:
    if declared is None:
        return
    algo, sep, value = declared.partition(":")
    if not sep or algo not in _ALGOS:
        raise Fallback(f"digest {declared!r} not in a usual form")
    try:
        ok = _digest_matches(value, hashlib.new(algo, data).digest())
    except ValueError:  # binascii.Error included
        ok = False
    if not ok:
        raise Fallback(f"digest {declared!r} does not match")


_per_thread = threading.local()


def _header_compressor(hdict):
    """This thread's compressor for header lists against ``hdict`` (an archive's dictionary)."""
    mine = getattr(_per_thread, "headers", None)
    if mine is None or mine[0] is not hdict:
        mine = _per_thread.headers = (hdict, header_compressor(hdict))
    return mine[1]


def _work(jobs: list, hdict) -> tuple[list, list]:
    """For each (block, payload_start, block_digest, payload_digest, to_store, header_json): check the
    declared digests, key and encode ``to_store`` and compress ``header_json`` against the archive's
    header dictionary ``hdict``; returns the encoded blobs and header lists (or None), in order."""
    to_store = []
    heads = []
    for block, start, block_digest, payload_digest, payload, head in jobs:
        if block_digest is not None or payload_digest is not None:
            view = memoryview(block)
            _check(view, block_digest)
            _check(view[start:], payload_digest)
        if payload is not None:
            to_store.append(payload)
        if head is not None:
            heads.append(head)
    encoded = iter(blobs.encode_many(to_store))
    compressed = iter(_header_compressor(hdict).multi_compress_to_buffer(heads, threads=1) if heads else ())
    out_blobs, out_heads = [], []
    for job in jobs:
        payload = job[4]
        if payload is None:
            out_blobs.append(None)
        else:
            codec, stored = next(encoded)
            out_blobs.append((blobs.digest_of(payload), len(payload), codec, stored))
        out_heads.append(None if job[5] is None else next(compressed).tobytes())
    return out_blobs, out_heads


# ------------------------------------------------------------------ framing checks
class _Framing:
    """Checks what FastWARC tolerates in a plain (uncompressed) file and warcio does not, from the
    records' offsets.

    A record's head must be written canonically (``Name: value`` and CRLF), so that its length in
    bytes follows from the parsed fields; then the bytes between two records must be blank lines
    (warcio warns about anything else).
    """

    def __init__(self, fh, size: int):
        self.fd = fh.fileno()
        self.size = size
        self.prev: tuple[int, int] | None = None  # (start, head + block length) of the last record

    def record(self, pos: int, rec, pairs) -> None:
        """Check the start of record ``rec`` (its WARC header fields ``pairs``) at ``pos``."""
        if self.prev is None:
            if pos != 0:
                raise Fallback("data before the first record")
        elif pos <= self.prev[0]:
            raise Fallback("records out of order")
        else:
            start, length = self.prev
            gap = os.pread(self.fd, pos - start - length, start + length) if pos - start > length else b""
            # warcio wants at least one line after a block and only blank lines up to the next record
            if not gap or not gap.endswith(b"\n") or gap.strip(_BLANK):
                raise Fallback("missing or odd separator between records")
        head = len(rec.headers.status_line) + 4 + 4 * len(pairs) + sum([len(k) + len(v) for k, v in pairs])
        self.prev = (pos, head + rec.content_length)

    def finish(self) -> None:
        if self.prev is None:
            return
        start, length = self.prev
        if os.pread(self.fd, max(self.size - start - length, 0), start + length).strip(_BLANK):
            raise Fallback("data after the last record")


# ------------------------------------------------------------------ records of a gzip member
# What may follow a record's block inside its own gzip member (warcio reads either without a word).
_MEMBER_TAILS = (b"\r\n\r\n", b"")


def _member_record(member: bytes) -> tuple[str, "_Fields", bytes, int, int]:
    """(WARC-Type, fields, member, start, stop) of the one record a gzip member must hold, its block
    ``member[start:stop]`` (not copied out: the importer takes what it needs), written canonically
    (``Name: value`` lines, CRLF line ends, each name once), as warcio would read it."""
    end = member.find(b"\r\n\r\n")
    if end < 0:
        raise Fallback("a WARC head without its end")
    try:
        head = member[:end].decode("utf-8")
    except UnicodeDecodeError:
        raise Fallback("non-UTF-8 WARC head") from None
    lines = head.split("\r\n")
    if head.count("\n") != len(lines) - 1 or head.count("\r") != len(lines) - 1:
        raise Fallback("odd line ends in a WARC head")
    if lines[0] != "WARC/1.0" and lines[0] != "WARC/1.1":
        raise Fallback("not WARC 1.0 or 1.1")
    d = {}
    for line in lines[1:]:
        name, sep, value = line.partition(": ")
        if not sep or ":" in name or name.strip() != name or value.strip() != value:
            raise Fallback("a WARC header line not written as 'Name: value'")
        d.setdefault(name.lower(), value)
    if len(d) != len(lines) - 1:
        raise Fallback("a repeated WARC header")
    length = d.get("content-length")
    if length is None or not length.isdigit():
        raise Fallback("unusual Content-Length")
    start = end + 4
    stop = start + int(length)
    if stop > len(member):
        raise Fallback("truncated record")
    if member[stop:] not in _MEMBER_TAILS:
        raise Fallback("a gzip member that is not exactly one record")
    return d.get("warc-type"), _Fields.of(d), member, start, stop


# ------------------------------------------------------------------ the importer
class FastWarcImporter(WarcImporter):
    """``WarcImporter`` fed by FastWARC; see the module docstring."""

    def run_file(self, path: Path, *, gzipped: bool, on_progress: Callable[[int], None] | None = None,
                 prefetch: "Prefetch | None" = None) -> ImportStats:
        self.writer = BulkWriter(self.archive)
        self.request_heads = _RequestHeads()
        self.on_progress = on_progress
        self.done_pos = 0
        hdict = self.archive.header_dict()
        pool = workers()
        inflight: deque = deque()
        try:
            if gzipped and prefetch is None:
                prefetch = Prefetch(path)
            with open(path, "rb") if prefetch is None else prefetch.fh as fh:
                size = os.fstat(fh.fileno()).st_size
                records: list[_Record] = []
                jobs: list = []
                batch_bytes = 0
                source = self._gzip_records(prefetch) if gzipped else self._plain_records(fh, size)
                with contextlib.closing(source):
                    for r, job in source:
                        records.append(r)
                        if job is not None:
                            jobs.append((r, job))
                            batch_bytes += len(job[0])
                        if batch_bytes >= BATCH_BYTES or len(records) >= BATCH_RECORDS:
                            inflight.append((pool.submit(_work, [j for _, j in jobs], hdict), records, jobs))
                            records, jobs, batch_bytes = [], [], 0
                        # store what the workers have finished while parsing goes on, so that
                        # little is left to store once the last record is parsed
                        while inflight and (len(inflight) >= MAX_IN_FLIGHT or inflight[0][0].done()):
                            self._apply(*inflight.popleft())
            inflight.append((pool.submit(_work, [j for _, j in jobs], hdict), records, jobs))
            while inflight:
                self._apply(*inflight.popleft())
        except BaseException:
            for fut, _, _ in inflight:
                fut.cancel()  # the ones running touch nothing shared; their results are dropped
            raise
        finally:
            if prefetch is not None:
                prefetch.close()  # whether made here or by the caller: the file is read
        self.writer.flush()
        self.writer = self.archive  # what comes later (revisits across files, pairing) writes directly
        self._progress(size)
        if self.stats.exchanges == 0 and not self.warcinfo and not self.stats.skipped and not self.revisits_waiting:
            raise Fallback("no records")
        return self.stats

    def _progress(self, pos: int) -> None:
        if self.on_progress and pos > self.done_pos:
            self.on_progress(pos - self.done_pos)
            self.done_pos = pos

    def _plain_records(self, fh, size: int):
        """The records of an uncompressed file, read by FastWARC, with their worker jobs."""
        framing = _Framing(fh, size)
        try:
            for rec in _FastIterator(fh, parse_http=False, auto_decode="none", fsspec_args=False):
                if not (is_warc_10(rec) or is_warc_11(rec)):
                    raise Fallback("not WARC 1.0 or 1.1")
                pairs = rec.headers.to_tuples()
                fields = _Fields(pairs)
                if len(fields.by_name) != len(pairs):
                    raise Fallback("a repeated WARC header")
                length = fields.by_name.get("content-length")
                if length is None or not length.isdigit() or rec.content_length != int(length):
                    raise Fallback("unusual Content-Length")
                if rec.content_length > MAX_FAST_RECORD:
                    raise Fallback("large record")
                framing.record(rec.stream_pos, rec, pairs)
                block = rec.reader.read()
                if len(block) != rec.content_length:
                    raise Fallback("truncated record")
                yield self._parse(fields.by_name.get("warc-type"), fields, block, 0, len(block))
                self._progress(rec.stream_pos)
            framing.finish()
        except OSError as exc:  # FastWARC's verdict on malformed input: let warcio name the problem
            raise Fallback(f"FastWARC: {exc}") from None

    def _gzip_records(self, pre: "Prefetch"):
        """The records of a per-record gzip file, inflated on the inflate thread a few batches
        ahead of the one being parsed here."""
        try:
            while pre.ahead:
                batch = pre.current = pre.ahead.popleft()
                pre.fill()
                yield from self._members(*batch)
                pre.current = None
        except gzip_members.Unusual as exc:
            raise Fallback(str(exc)) from None

    def _members(self, future, end: int):
        for member in future.result():
            yield self._parse(*_member_record(member))
        self._progress(end)

    def _parse(self, rtype, fields: _Fields, buf: bytes, bstart: int, bstop: int):
        """Check one record's fields and turn it into a ``_Record`` and its worker job; the record's
        block is ``buf[bstart:bstop]``. An HTTP record's block and payload are views of ``buf``
        (copying them would cost more than parsing the record); any other's block is bytes."""
        d = fields.by_name
        if rtype not in _TYPES:
            raise Fallback("unusual WARC-Type")
        if bstop - bstart > MAX_FAST_RECORD:
            raise Fallback("large record")
        if "warc-segment-number" in d:
            raise Fallback("segmented record")
        uri = d.get("warc-target-uri") or ""
        if uri.startswith("<") or (rtype != "warcinfo" and not _WARC_DATE.match(d.get("warc-date") or "")):
            raise Fallback("unusual WARC-Target-URI or WARC-Date")
        http = None
        start = 0
        entry = None
        if bstop > bstart and rtype in _HTTP_RECORDS and uri.startswith(("http:", "https:")):
            if rtype == "request":
                http, start, entry = self.request_heads.parse(buf, bstart, bstop)
            else:
                http, start = _parse_http(buf, False, bstart, bstop)
            view = memoryview(buf)
            block = view[bstart:bstop]
            body = view[start:bstop]
            start -= bstart
        else:
            block = body = buf[bstart:bstop] if bstart or bstop != len(buf) else buf
        r = _Record(rtype, fields, http, body)
        if entry is not None:
            r.head_entry = entry
            if entry[2] is None:  # not yet compressed: a worker does it (again, if one is at it already)
                r.http_json = entry[1]
        elif http is not None:
            r.http_json = headers_json(http.headers)
        if rtype == "resource" or rtype == "response" and http is None:
            if rtype == "response" and uri.lower().startswith(("http:", "https:")):
                raise Fallback("HTTP response without an HTTP head")
            r.payload = r.body  # stored as a resource (dns:, whois: responses too)
        elif rtype == "response":
            try:
                r.payload, r.dechunked = decode_transfer(r.body, http.headers)
            except Exception:
                raise Fallback("bad chunked encoding") from None
        if rtype == "revisit":
            block_digest = payload_digest = None  # warcio checks no digests on revisits
        else:
            block_digest, payload_digest = d.get("warc-block-digest"), d.get("warc-payload-digest")
        if block_digest is None and payload_digest is None and r.payload is None and http is None:
            return r, None
        return r, (block, start, block_digest, payload_digest, r.payload, r.http_json)

    def _apply(self, future, records: list[_Record], jobs: list) -> None:
        """Store a batch of records in file order once its worker job is done."""
        encoded_blobs, encoded_heads = future.result()
        for (r, _), blob, head in zip(jobs, encoded_blobs, encoded_heads):
            r.blob = blob
            if head is not None:
                r.http_headers.headers.encoded = head
                if r.head_entry is not None:
                    r.head_entry[2] = head
        for r in records:
            if r.http_headers is None:
                self._one(r, None)
            elif r.rec_type == "response" and r.blob is not None:
                self._response_fast(r)
            elif r.rec_type == "request":
                self._request_fast(r)
            else:
                self._one(r, None)
        if len(self.writer.rows) >= FLUSH_ROWS or self.writer.blob_bytes >= FLUSH_BYTES:
            self.writer.flush()

    def _response_fast(self, r: _Record) -> None:
        """``WarcImporter._response`` for the common case, a response with an HTTP head whose
        payload a worker has encoded: the same row, without the general path's layers."""
        d = r.rec_headers.by_name
        status, reason, protocol = status_line_of(r)
        extra = {}
        ip = d.get("warc-ip-address")
        if ip:
            extra["ip"] = ip
        if r.dechunked:
            extra["dechunked"] = True
        if open_stream(d.get("warc-truncated"), r.http_headers.headers):
            extra["open_stream"] = True
        writer = self.writer
        digest = writer.put_encoded_blob(*r.blob)
        ex = Exchange(url=d["warc-target-uri"], captured_at=d["warc-date"], status=status, reason=reason,
                      http_version=protocol, resp_headers=r.http_headers.headers, extra=extra,
                      session_id=self.session_id, payload_digest=digest)
        ex_id = writer.add_exchange(ex)
        self.stats.exchanges += 1
        wdigest = d.get("warc-payload-digest")
        if wdigest:
            writer.add_alias(wdigest.strip(), digest)
        rid = d.get("warc-record-id")
        if rid:
            self.by_record_id[rid] = ex_id
            waiting = self.requests_waiting.pop(rid, None)
            if waiting:
                self._attach(ex_id, *waiting)

    def _request_fast(self, r: _Record) -> None:
        """``WarcImporter._request`` for a request with an HTTP head (checked by ``_parse``)."""
        d = r.rec_headers.by_name
        headers = r.http_headers.headers
        body, _ = decode_transfer(r.body, headers)
        fields = (r.http_headers.protocol, headers, bytes(body) if body else None)  # the method: one of _HTTP_VERBS
        target = d.get("warc-concurrent-to")
        if target and target in self.by_record_id:
            self._attach(self.by_record_id[target], *fields)
        elif target:
            self.requests_waiting[target] = fields
        else:
            self.requests_loose.append((d["warc-target-uri"], normalize_time(d["warc-date"])) + fields)

    # ---------------------------------------------------------------- WarcImporter hooks
    def _read_block(self, record, counter, stream=None) -> bytes:
        return record.body

    def _check_digest(self, record) -> None:
        pass  # checked by the worker before the record is stored

    def _payload(self, record, counter, headers) -> tuple[bytes, bool]:
        return record.payload, record.dechunked

    def _headers_of(self, record) -> list[tuple[str, str]]:
        return record.http_headers.headers  # a _HeaderList, with its encoded form once a worker made it

    def _put_payload(self, record, payload: bytes) -> str:
        blob = getattr(record, "blob", None)
        if blob is not None and payload is record.payload:
            return self.writer.put_encoded_blob(*blob)
        return self.writer.put_blob(payload)

    # A revisit's original is looked up in what the BulkWriter keeps of this file's rows and, for
    # older rows (ids below its first_id), in the database; same answers as the general queries,
    # without flushing the buffered rows first.
    def resolve_alias(self, alias: str) -> str | None:
        w = self.writer
        if isinstance(w, BulkWriter) and w.kept_complete and alias in w.alias_map:
            return w.alias_map[alias]
        return super().resolve_alias(alias)

    def find_original(self, ref: dict, digest: str | None):
        w = self.writer
        if not isinstance(w, BulkWriter) or not w.kept_complete:
            if isinstance(w, BulkWriter):
                w.flush()
            return super().find_original(ref, digest)
        conn = self.archive.conn
        if ref["refers_to"] and ref["refers_to"] in self.by_record_id:
            ex_id = self.by_record_id[ref["refers_to"]]
            return w.kept_row(ex_id) if ex_id >= w.first_id else self.archive.exchange_row(ex_id)
        target = ref["refers_to_uri"]
        if target:
            when = normalize_time(ref["refers_to_date"]) if ref["refers_to_date"] else None
            sql, params = "SELECT * FROM exchanges WHERE surt=? AND url=? AND id<?", [surt_key(target), target,
                                                                                      w.first_id]
            if when:
                sql += " AND captured_at=?"
                params.append(when)
            if digest:
                sql += " AND payload=?"
                params.append(digest)
            older = w.first_id > 1  # an archive that held no rows before has nothing to query
            best = conn.execute(sql + " ORDER BY captured_at, id LIMIT 1", params).fetchone() if older else None
            for ex_id in w.by_url.get(target, ()):
                row = w.kept[ex_id]
                captured_at = row[_CAPTURED_AT]
                if (when and captured_at != when) or (digest and row[_PAYLOAD] != digest):
                    continue
                if best is None or (captured_at, ex_id) < (best["captured_at"], best["id"]):
                    best = w.kept_row(ex_id)
            if best is not None:
                return best
        if digest:
            if w.first_id > 1:
                row = conn.execute("SELECT * FROM exchanges WHERE payload=? AND id<? ORDER BY id LIMIT 1",
                                   (digest, w.first_id)).fetchone()
                if row is not None:
                    return row
            ex_id = w.by_payload.get(digest)
            return None if ex_id is None else w.kept_row(ex_id)
        return None


class Prefetch:
    """A per-record gzip file, memory-mapped, with its first batches of members inflating on the
    inflate thread from the moment this is made: an import makes it before it creates or opens the
    archive and hashes the file, so that inflating is not held up by either. ``close`` (which the
    import's reader calls once done) cancels what is still queued and unmaps the file."""

    def __init__(self, path: Path):
        self.fh = open(path, "rb")
        try:
            self.buf = gzip_members.open_mapped(self.fh)
        except BaseException:
            self.fh.close()
            raise
        self.cuts = gzip_members.batches(self.buf, os.fstat(self.fh.fileno()).st_size)
        self.ahead: deque = deque()
        self.current = None  # the batch being read, off ``ahead``
        self.fill()

    def fill(self) -> None:
        """Queue batches until INFLATE_AHEAD are inflating or waiting to be read."""
        pool = workers("inflate")
        while len(self.ahead) < INFLATE_AHEAD:
            cut = next(self.cuts, None)
            if cut is None:
                return
            start, end = cut
            self.ahead.append((pool.submit(gzip_members.inflate, self.buf, start, end, MAX_FAST_RECORD), end))

    def close(self) -> None:
        if self.buf.closed:
            return
        pending = list(self.ahead) + ([self.current] if self.current else [])
        for fut, _ in pending:
            fut.cancel()
        futures.wait([fut for fut, _ in pending])  # the map must outlive every reader of it
        self.ahead.clear()
        self.current = None
        self.buf.close()
        self.fh.close()


def prefetch(path: Path) -> Prefetch | None:
    """Start inflating ``path`` ahead of its import (see :class:`Prefetch`), when the fast path
    will read it as a per-record gzip file; None otherwise or when it cannot be read."""
    if not available() or os.environ.get("WEBFREEZE_NO_FASTWARC"):
        return None
    try:
        return Prefetch(path)
    except (OSError, ValueError):  # unreadable or empty: the import itself reports it
        return None


def import_fast(archive: Archive, path: Path, session_id: str, *, gzipped: bool,
                on_progress: Callable[[int], None] | None = None,
                prefetched: Prefetch | None = None) -> FastWarcImporter:
    """Import ``path`` with the fast path inside a savepoint; raises :class:`Fallback` (with the
    savepoint rolled back, nothing written) when the file needs warcio. ``prefetched`` (for a gzip
    file) is read and closed."""
    importer = FastWarcImporter(archive, session_id, path.name)
    try:
        with archive.savepoint("fast_import"):
            importer.run_file(path, gzipped=gzipped, on_progress=on_progress, prefetch=prefetched)
    except BadInput as exc:  # warcio names every problem, so that both paths say the same
        raise Fallback(str(exc)) from None
    return importer
