"""The fast path of ``archive import`` for well-formed WARC 1.0/1.1 files: FastWARC parses,
worker threads verify digests, hash and compress, and ``WarcImporter``'s own logic stores.

FastWARC (a compiled WARC reader) is several times faster than warcio, but it is more lenient in
places (a missing separator line, two records in one gzip member) and it reads no ARC. So this path
only ever *accepts* input: every record must pass checks at least as strict as warcio's, and on
anything unusual (a digest that does not match as written, an odd header, a framing doubt, a huge
record) it raises :class:`Fallback`. The caller then undoes this file's writes (a savepoint) and
imports it again with warcio, whose verdict and error messages are the reference. So the outcome of
an import is warcio's in every case; only well-formed files get faster.

Work per record is split so that two cores help: the main thread (which holds Python's GIL) parses
and stores, while a small thread pool runs the GIL-free parts (SHA-1 digest checks, SHA-256 keys,
zstd) for batches of records. Records are stored strictly in file order, through the same
``WarcImporter`` methods as the warcio path, so row ids, pairing and revisit resolution match.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import blobs
from .errors import BadInput
from .store import Archive, BulkWriter, header_compressor, headers_json
from .warc_import import BOMB_MIN_BYTES, ImportStats, WarcImporter, decode_transfer

try:  # an optional accelerator: without it every import takes the warcio path
    from fastwarc.warc import ArchiveIterator as _FastIterator
    from fastwarc.warc import is_warc_10, is_warc_11
except ImportError:  # pragma: no cover - fastwarc is a base dependency
    _FastIterator = None

# A batch of records handed to a worker: big enough that hand-over costs little per record.
BATCH_BYTES = 1 << 20
BATCH_RECORDS = 64
MAX_IN_FLIGHT = 4
WORKERS = 2
# Records larger than this take the warcio path (it streams them and checks for bombs).
MAX_FAST_RECORD = BOMB_MIN_BYTES
# Buffered rows are written once this many, or blobs of this many bytes, are waiting (and whenever
# rows are read back): batches for SQLite, bounded memory, and a file that grows as it goes.
FLUSH_ROWS = 512
FLUSH_BYTES = 4 << 20

_HTTP_RECORDS = ("response", "request", "revisit")
_HTTP_VERBS = ("GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "OPTIONS", "CONNECT", "PATCH")
_TYPES = frozenset(["warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion",
                    "continuation"])
_ALGOS = frozenset(["sha1", "sha256", "sha512", "md5"])
_WARC_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_BLANK = b" \t\r\n\x0b\x0c"
_GZIP_MAGIC = b"\x1f\x8b"
# An HTTP header line as the fast path accepts it: not starting with blank space, a colon in it,
# no CR or LF inside; lines separated by CRLF.
_LINE = r"(?:[^ \t\r\n:][^:\r\n]*)?:[^\r\n]*"
_HEAD_FIELDS = re.compile(rf"{_LINE}(?:\r\n{_LINE})*")
_HEAD_FIELD = re.compile(r"([^:\r\n]*):([^\r\n]*)")


class Fallback(Exception):
    """This file needs warcio (odd or bad input); the message says why, for debugging."""


def available() -> bool:
    return _FastIterator is not None


_pool_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None


def workers() -> ThreadPoolExecutor:
    """The worker threads, started on first use and kept for the process (starting threads costs
    a small import more than its records do); a forked child starts its own."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(WORKERS, thread_name_prefix="import"))
        return _pool[1]


# ------------------------------------------------------------------ records as warcio shows them
class _Fields:
    """WARC or HTTP header fields with warcio's case-insensitive ``get_header`` (first match wins)."""

    __slots__ = ("_d",)

    def __init__(self, pairs):
        d = {}
        for k, v in pairs:
            d.setdefault(k.lower(), v)
        self._d = d

    def get_header(self, name: str, default=None):
        key = _LOWER.get(name)
        if key is None:
            key = name.lower()
            if len(_LOWER) < 1024:
                _LOWER[name] = key
        return self._d.get(key, default)


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

    __slots__ = ("rec_type", "rec_headers", "http_headers", "body", "payload", "dechunked", "blob", "http_json")
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


def _parse_http(block: bytes, request: bool) -> tuple[_Http, int]:
    """The HTTP head of a block as warcio parses it (non-verifying parser), and where the payload
    starts. Only plain heads are accepted: CRLF line ends, no folded lines, ``Name: value`` lines."""
    end = block.find(b"\r\n\r\n")
    start = end + 4
    if end < 0:  # a head that runs to the end of the block (a revisit): warcio reads it to the end
        end = len(block) - 2 if block.endswith(b"\r\n") else len(block)
        start = len(block)
    try:
        head = block[:end].decode("utf-8")
    except UnicodeDecodeError:
        raise Fallback("non-UTF-8 HTTP head") from None
    first, sep, fields = head.partition("\r\n")
    first = first.rstrip()
    if sep and not fields:
        raise Fallback("odd line ends in HTTP head")
    # Every line after the first must be `Name: value` (no folding, CRLF only): then the pairs
    # below are what splitting on CRLF and on each line's first colon gives.
    if not first or "\r" in first or "\n" in first or (fields and not _HEAD_FIELDS.fullmatch(fields)):
        raise Fallback("odd line ends or header lines in HTTP head")
    protocol, _, rest = first.partition(" ")
    if request:
        if protocol not in _HTTP_VERBS:
            raise Fallback("unusual request method")
    elif not protocol.upper().startswith("HTTP/"):
        raise Fallback("no HTTP status line")
    headers = _HeaderList([(name.rstrip(" \t"), value.strip()) for name, value in _HEAD_FIELD.findall(fields)])
    return _Http(protocol, rest.strip(), headers), start


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
    """Checks what FastWARC tolerates and warcio does not, from the records' offsets.

    A record's head must be written canonically (``Name: value`` and CRLF), so that its length in
    bytes follows from the parsed fields. Then, in a plain file, the bytes between two records must
    be blank lines (warcio warns about anything else); in a per-record gzip file, every record must
    start a gzip member and fill it alone (the member's ISIZE field gives its uncompressed length).
    """

    def __init__(self, fh, gzipped: bool, size: int):
        self.fd = fh.fileno()
        self.gzipped = gzipped
        self.size = size
        self.prev: tuple[int, int] | None = None  # (start, head + block length) of the last record

    def record(self, pos: int, rec, pairs) -> None:
        """Check the start of record ``rec`` (its WARC header fields ``pairs``) at ``pos``."""
        if self.prev is None:
            if pos != 0:
                raise Fallback("data before the first record")
            if self.gzipped and os.pread(self.fd, 2, pos) != _GZIP_MAGIC:
                raise Fallback("record not at a gzip member start")
        elif pos <= self.prev[0]:
            raise Fallback("two records in one gzip member")
        else:
            self._check_end(pos)
        head = len(rec.headers.status_line) + 4 + 4 * len(pairs) + sum([len(k) + len(v) for k, v in pairs])
        self.prev = (pos, head + rec.content_length)

    def _check_end(self, stop: int, last: bool = False) -> None:
        """Check the end of the previous record, ``stop`` being where the next one starts."""
        start, length = self.prev
        if self.gzipped:
            # one read: the member's ISIZE field, then the next member's first two bytes
            tail = os.pread(self.fd, 6, stop - 4)
            isize = int.from_bytes(tail[:4], "little")
            # the record, then nothing or a blank line or two (FastWARC rejects anything else there)
            if (isize - length) & 0xFFFFFFFF not in (0, 2, 4):
                raise Fallback("a gzip member that is not exactly one record")
            if not last and tail[4:] != _GZIP_MAGIC:
                raise Fallback("record not at a gzip member start")
            return
        gap = os.pread(self.fd, stop - start - length, start + length) if stop - start > length else b""
        # warcio wants at least one line after a block and only blank lines up to the next record
        if not gap or not gap.endswith(b"\n") or gap.strip(_BLANK):
            raise Fallback("missing or odd separator between records")

    def finish(self) -> None:
        if self.prev is None:
            return
        if self.gzipped:
            self._check_end(self.size, last=True)
            return
        start, length = self.prev
        if os.pread(self.fd, max(self.size - start - length, 0), start + length).strip(_BLANK):
            raise Fallback("data after the last record")


# ------------------------------------------------------------------ the importer
class FastWarcImporter(WarcImporter):
    """``WarcImporter`` fed by FastWARC; see the module docstring."""

    def run_file(self, path: Path, *, gzipped: bool,
                 on_progress: Callable[[int], None] | None = None) -> ImportStats:
        size = path.stat().st_size
        self.writer = BulkWriter(self.archive)
        hdict = self.archive.header_dict()
        pool = workers()
        inflight: deque = deque()
        try:
            with open(path, "rb") as fh:
                framing = _Framing(fh, gzipped, size)
                records: list[_Record] = []
                jobs: list = []
                batch_bytes = 0
                done_pos = 0
                try:
                    it = _FastIterator(fh, parse_http=False, auto_decode="none", fsspec_args=False)
                    for rec in it:
                        r, job = self._parse(rec, framing)
                        records.append(r)
                        if job is not None:
                            jobs.append((r, job))
                            batch_bytes += len(job[0])
                        if batch_bytes >= BATCH_BYTES or len(records) >= BATCH_RECORDS:
                            inflight.append((pool.submit(_work, [j for _, j in jobs], hdict), records, jobs))
                            records, jobs, batch_bytes = [], [], 0
                            while len(inflight) >= MAX_IN_FLIGHT:
                                self._apply(*inflight.popleft())
                        if on_progress:
                            pos = rec.stream_pos
                            if pos > done_pos:
                                on_progress(pos - done_pos)
                                done_pos = pos
                    framing.finish()
                except OSError as exc:  # FastWARC's verdict on malformed input: let warcio name the problem
                    raise Fallback(f"FastWARC: {exc}") from None
            inflight.append((pool.submit(_work, [j for _, j in jobs], hdict), records, jobs))
            while inflight:
                self._apply(*inflight.popleft())
        except BaseException:
            for fut, _, _ in inflight:
                fut.cancel()  # the ones running touch nothing shared; their results are dropped
            raise
        self.writer.flush()
        self.writer = self.archive  # what comes later (revisits across files, pairing) writes directly
        if on_progress and size > done_pos:
            on_progress(size - done_pos)
        if self.stats.exchanges == 0 and not self.warcinfo and not self.stats.skipped:
            raise Fallback("no records")
        return self.stats

    def _parse(self, rec, framing: _Framing):
        """Check one FastWARC record and turn it into a ``_Record`` and its worker job."""
        if not (is_warc_10(rec) or is_warc_11(rec)):
            raise Fallback("not WARC 1.0 or 1.1")
        pairs = rec.headers.to_tuples()
        fields = _Fields(pairs)
        if len(fields._d) != len(pairs):
            raise Fallback("a repeated WARC header")
        d = fields._d
        rtype = d.get("warc-type")
        length = d.get("content-length")
        if rtype not in _TYPES or length is None or not length.isdigit():
            raise Fallback("unusual WARC-Type or Content-Length")
        n = int(length)
        if n > MAX_FAST_RECORD or rec.content_length != n:
            raise Fallback("large record")
        if "warc-segment-number" in d:
            raise Fallback("segmented record")
        uri = d.get("warc-target-uri") or ""
        if uri.startswith("<") or (rtype != "warcinfo" and not _WARC_DATE.match(d.get("warc-date") or "")):
            raise Fallback("unusual WARC-Target-URI or WARC-Date")
        framing.record(rec.stream_pos, rec, pairs)
        block = rec.reader.read()
        if len(block) != n:
            raise Fallback("truncated record")
        http = None
        start = 0
        if n and rtype in _HTTP_RECORDS and uri.startswith(("http:", "https:")):
            http, start = _parse_http(block, rtype == "request")
        r = _Record(rtype, fields, http, block[start:] if start else block)
        if http is not None:
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
        for r in records:
            self._one(r, None)
        if len(self.writer.rows) >= FLUSH_ROWS or self.writer.blob_bytes >= FLUSH_BYTES:
            self.writer.flush()

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

    def _resolve_revisit(self, *args) -> bool:
        if isinstance(self.writer, BulkWriter):
            self.writer.flush()  # it looks up rows stored before
        return super()._resolve_revisit(*args)


def import_fast(archive: Archive, path: Path, session_id: str, *, gzipped: bool,
                on_progress: Callable[[int], None] | None = None) -> FastWarcImporter:
    """Import ``path`` with the fast path inside a savepoint; raises :class:`Fallback` (with the
    savepoint rolled back, nothing written) when the file needs warcio."""
    importer = FastWarcImporter(archive, session_id, path.name)
    try:
        with archive.savepoint("fast_import"):
            importer.run_file(path, gzipped=gzipped, on_progress=on_progress)
    except BadInput as exc:  # warcio names every problem, so that both paths say the same
        raise Fallback(str(exc)) from None
    return importer
