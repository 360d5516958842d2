"""The FastWARC import path gives exactly the warcio path's outcome: same rows, blobs and stats for
files it accepts, and for odd or bad files it hands over to warcio (same error line, same warnings)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import time
from pathlib import Path

import pytest

from webfreeze.archives import Archive, ArchiveError, fast_import, new_archive_atomically
from webfreeze.archives.importer import import_files


def dump(path: Path) -> dict:
    with Archive.open(path) as arc:
        q = arc.conn.execute
        return {
            "exchanges": [dict(r) for r in q("SELECT * FROM exchanges ORDER BY id")],
            "blobs": [tuple(r) for r in q("SELECT digest, size, stored_size, codec, data, base FROM blobs ORDER BY digest")],
            "aliases": [tuple(r) for r in q("SELECT * FROM digest_aliases ORDER BY alias")],
            "sessions": [(r["id"], r["source"], r["tool"], r["info"]) for r in q("SELECT * FROM sessions ORDER BY id")],
        }


def outcome(sources: list[Path], target: Path, monkeypatch, *, fast: bool):
    """('ok', stats, archive contents) or ('error', message) of importing ``sources`` one way."""
    if fast:
        monkeypatch.delenv("WEBFREEZE_NO_FASTWARC", raising=False)
    else:
        monkeypatch.setenv("WEBFREEZE_NO_FASTWARC", "1")
    try:
        results = import_files(target, sources)
    except ArchiveError as exc:
        return ("error", str(exc))
    return ("ok", [r.stats for r in results], dump(target))


def assert_same_outcome(sources, tmp_path, monkeypatch):
    fast = outcome(sources, tmp_path / "fast.wfz", monkeypatch, fast=True)
    slow = outcome(sources, tmp_path / "warcio.wfz", monkeypatch, fast=False)
    assert fast == slow
    return fast


def fast_accepts(path: Path, tmp_path: Path) -> bool:
    """Whether the fast path imports ``path`` on its own (no hand-over to warcio)."""
    with new_archive_atomically(tmp_path / "probe.wfz") as arc, arc.transaction():
        sid = arc.new_session("import", source=path.name)
        with open(path, "rb") as fh:
            gzipped = fh.read(2) == b"\x1f\x8b"
        try:
            fast_import.import_fast(arc, path, sid, gzipped=gzipped)
        except fast_import.Fallback:
            return False
    return True


WELL_FORMED = ["dupes.warc.gz", "example.warc.gz", "example2.warc.gz", "example-url-agnostic-orig.warc.gz",
               "example-wget-1-14.warc.gz", "example-wpull.warc.gz", "httpbin-resource.warc.gz", "iana.warc.gz",
               "post-test.warc.gz"]


@pytest.mark.parametrize("name", WELL_FORMED)
def test_the_fast_path_takes_well_formed_warcs(name, samples, tmp_path):
    assert fast_import.available()
    assert fast_accepts(samples / name, tmp_path)


@pytest.mark.parametrize("name", ["example-bad.warc.gz.bad", "example-extra.warc", "missing-status-text.warc",
                                  "example.warc"])
def test_odd_samples_go_to_warcio(name, samples, tmp_path):
    # gzipped as a whole; a lying digest; CR CR LF line ends; a record FastWARC reads differently
    assert not fast_accepts(samples / name, tmp_path)


WARC_SAMPLES = ["dupes.warc.gz", "example-bad.warc.gz.bad", "example-extra.warc", "example-url-agnostic-orig.warc.gz",
                "example-url-agnostic-revisit.warc.gz", "example-wget-1-14.warc.gz", "example-wpull.warc.gz",
                "example.warc", "example.warc.gz", "example2.warc.gz", "httpbin-resource.warc.gz", "iana.warc.gz",
                "missing-status-text.warc", "post-test.warc.gz"]


@pytest.mark.parametrize("names", [[n] for n in WARC_SAMPLES] + [
    ["dupes.warc.gz", "iana.warc.gz"],
    ["example-url-agnostic-revisit.warc.gz", "example-url-agnostic-orig.warc.gz"],
    ["example.warc.gz", "example-extra.warc"],
], ids=lambda names: "+".join(names))
def test_both_paths_agree_on_every_sample(names, samples, tmp_path, monkeypatch):
    assert_same_outcome([samples / n for n in names], tmp_path, monkeypatch)


def test_both_paths_agree_on_an_import_into_an_existing_archive(samples, tmp_path, monkeypatch):
    for fast in (True, False):
        target = tmp_path / f"{fast}.wfz"
        outcome([samples / "example.warc.gz"], target, monkeypatch, fast=fast)
        # the second file's revisits and payloads meet blobs stored by the first import
        outcome([samples / "dupes.warc.gz", samples / "iana.warc.gz"], target, monkeypatch, fast=fast)
    assert dump(tmp_path / "True.wfz")["exchanges"] == dump(tmp_path / "False.wfz")["exchanges"]
    assert dump(tmp_path / "True.wfz")["blobs"] == dump(tmp_path / "False.wfz")["blobs"]


# ---------------------------------------------------------------- hand-made odd files
def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def record(n: int, *, kind="response", body: bytes | None = None, http: bytes | None = None, sep=b"\r\n\r\n",
           version=b"WARC/1.0", uri: str | None = None, length_delta=0, digests=True, extra: bytes = b"",
           payload_digest: str | None = None, names_lower=False) -> bytes:
    body = body if body is not None else f"<html>page {n}</html>".encode()
    if http is None and kind == "response":
        http = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    block = (http or b"") + body
    uri = uri or f"http://example.com/{n}"
    fields = [("WARC-Type", kind), ("WARC-Target-URI", uri), ("WARC-Date", "2020-01-01T00:00:00Z"),
              ("WARC-Record-ID", f"<urn:uuid:00000000-0000-0000-0000-{n:012d}>")]
    if digests:
        fields += [("WARC-Payload-Digest", payload_digest or sha1_b32(body)), ("WARC-Block-Digest", sha1_b32(block))]
    fields.append(("Content-Length", str(len(block) + length_delta)))
    head = version + b"\r\n" + b"".join(
        f"{k.lower() if names_lower else k}: {v}\r\n".encode() for k, v in fields) + extra + b"\r\n"
    return head + block + sep


def gz(*records: bytes, level: int = 9) -> bytes:
    return b"".join(gzip.compress(r, compresslevel=level) for r in records)


# Stored (level 0) deflate keeps a body's bytes as they are, so the gzip magic inside a body also
# stands in the compressed file: it must not be taken for the start of the next record's member.
_MAGIC_BODY = b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4
# A body that is itself a gzipped WARC record, just past where the import cuts its first batch of
# members (256 KiB): that cut looks like a record start, is found wrong, and warcio takes over.
_WARC_IN_BODY = b"x" * (300 << 10) + gzip.compress(record(8), compresslevel=0) + b"y" * 1000


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
ODD = {
    "plain, well formed": (record(1) + record(2), True),
    "plain, no separator": (record(1, sep=b"") + record(2), False),
    "plain, extra blank lines": (record(1, sep=b"\r\n\r\n\r\n\r\n") + record(2), True),
    "plain, LF separator": (record(1, sep=b"\n\n") + record(2), True),
    "plain, garbage between records": (record(1, sep=b"\r\nxx\r\n") + record(2), False),
    "plain, Content-Length 2 short": (record(1, length_delta=-2, digests=False) + record(2), False),
    "plain, Content-Length 2 long": (record(1, length_delta=2, digests=False) + record(2), True),  # both read CRLF
    "plain, trailing junk": (record(1) + b"junk", False),
    "plain, leading blank line": (b"\r\n" + record(1), False),
    "WARC/0.18": (record(1, version=b"WARC/0.18"), False),
    "lower-case WARC field names": (record(1, names_lower=True) + record(2), False),
    "field with extra spaces": (record(1, extra=b"X-Note:   spaced   \r\n"), False),
    "bracketed target URI": (record(1, uri="<http://example.com/b>"), False),
    "gzip, well formed": (gz(record(1), record(2)), True),
    "gzip, no separator in a member": (gz(record(1, sep=b""), record(2)), True),
    "gzip, two records in one member": (gzip.compress(record(1) + record(2)) + gzip.compress(record(3)), False),
    "gzip, two records in the last member": (gzip.compress(record(1)) + gzip.compress(record(2) + record(3)), False),
    "gzip, garbage in a member": (gz(record(1, sep=b"\r\nxx\r\n"), record(2)), False),
    "gzip, trailing junk": (gz(record(1)) + b"junk", False),
    "gzip magic inside a stored member": (gz(record(1, body=_MAGIC_BODY), record(2), level=0), True),
    "gzipped WARC record inside a body": (gz(record(1, body=_WARC_IN_BODY), record(2), level=0), False),
    "lying payload digest": (gz(record(1, payload_digest=sha1_b32(b"other"))), False),
    "lying block digest": (gz(record(1, http=b"HTTP/1.1 200 OK\r\nX: 1\r\n\r\n").replace(b"X: 1", b"X: 2")), False),
    "hex payload digest": (gz(record(1, payload_digest="sha1:" + hashlib.sha1(b"<html>page 1</html>").hexdigest())),
                           True),
    "unknown digest algorithm": (gz(record(1, payload_digest="crc32:AAAA")), False),
    "folded HTTP header": (gz(record(1, http=b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\n\r\n")), False),
    "LF-only HTTP head": (gz(record(1, http=b"HTTP/1.1 200 OK\nContent-Type: text/plain\n\n")), False),
    "HTTP header without colon": (gz(record(1, http=b"HTTP/1.1 200 OK\r\nnonsense\r\n\r\n")), False),
    "no HTTP status line": (gz(record(1, http=b"")), False),
    "malformed status code": (gz(record(1, http=b"HTTP/1.1 2xx OK\r\n\r\n")), False),  # warcio names it
    "chunked response": (gz(record(1, http=CHUNKED, body=b"5\r\nhello\r\n0\r\n\r\n")), True),
    "dns: response": (gz(record(1, uri="dns:example.com", http=b"", body=b"example.com. 60 IN A 1.2.3.4\n")), True),
    "resource and metadata": (gz(record(1, kind="resource", http=b""), record(2, kind="metadata", http=b"")), True),
    "request before its response": (gz(
        record(1, kind="request", http=b"GET /1 HTTP/1.1\r\nHost: example.com\r\n\r\n", body=b""), record(1)), True),
    "POST request with a form body": (gz(record(1), record(
        2, kind="request", uri="http://example.com/1", body=b"a=1&b=2",
        http=b"POST /1 HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\n")),
        True),
    "request with an unusual method": (gz(record(1), record(
        2, kind="request", uri="http://example.com/1", body=b"", http=b"BREW /pot HTTP/1.1\r\n\r\n")), False),
}


@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_files_have_the_same_outcome_both_ways(case, tmp_path, monkeypatch):
    data, fast_expected = ODD[case]
    src = tmp_path / ("input.warc.gz" if data[:2] == b"\x1f\x8b" else "input.warc")
    src.write_bytes(data)
    assert_same_outcome([src], tmp_path, monkeypatch)
    # and the fast path takes exactly the files it is meant to take
    assert fast_accepts(src, tmp_path) == fast_expected


def test_a_fallback_leaves_nothing_of_the_fast_attempt(samples, tmp_path):
    """Records stored before the fast path hands over are rolled back (a savepoint), so warcio starts clean."""
    src = tmp_path / "late-lie.warc.gz"
    src.write_bytes((samples / "iana.warc.gz").read_bytes() + gz(record(9, payload_digest=sha1_b32(b"lie"))))
    with new_archive_atomically(tmp_path / "a.wfz") as arc, arc.transaction():
        sid = arc.new_session("import", source=src.name)
        with pytest.raises(fast_import.Fallback, match="does not match"):
            fast_import.import_fast(arc, src, sid, gzipped=True)
        assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 0
        assert arc.conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 1  # the header dictionary


def _held(path: Path) -> list[str]:
    """How this process still holds ``path``: open descriptors and memory maps of it."""
    import os

    real = os.path.realpath(path)
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == real:
                held.append(f"fd {fd}")
        except OSError:
            pass
    with open("/proc/self/maps") as maps:
        held += [line.strip() for line in maps if line.rstrip().endswith(real)]
    return held


def test_an_import_lets_go_of_its_sources_whatever_the_outcome(samples, tmp_path):
    """The first file starts inflating before the archive is made (``fast_import.Prefetch``): it is
    closed and unmapped after an import, a skipped re-import, a fallback to warcio, and an error."""
    good = tmp_path / "good.warc.gz"
    good.write_bytes((samples / "iana.warc.gz").read_bytes())
    lying = tmp_path / "lying.warc.gz"
    lying.write_bytes(gz(record(1, payload_digest=sha1_b32(b"other"))))
    target = tmp_path / "a.wfz"
    results = import_files(target, [good])
    assert results[0].stats.exchanges > 0 and _held(good) == []
    assert import_files(target, [good])[0].skipped and _held(good) == []
    with pytest.raises(ArchiveError, match="digest"):
        import_files(tmp_path / "b.wfz", [lying])  # the fast path hands over; warcio says why
    assert _held(lying) == [] and not (tmp_path / "b.wfz").exists()
    with pytest.raises(ArchiveError, match="no such directory"):
        import_files(tmp_path / "nowhere" / "c.wfz", [good])  # after the file started inflating
    # unmapped at once; the file's SHA-256 (its session id), hashing on a worker thread when the
    # import failed, may keep it open a moment longer
    assert [h for h in _held(good) if not h.startswith("fd ")] == []
    for _ in range(100):
        if not _held(good):
            break
        time.sleep(0.05)
    assert _held(good) == []


def test_ctrl_c_while_the_last_batch_inflates(samples, tmp_path, monkeypatch):
    """Ctrl-C while the import waits for its only batch of members: a KeyboardInterrupt, nothing
    left behind, and the file unmapped (closing the map under the inflating thread raised
    BufferError and leaked it). The inflate is slowed down so that the interrupt lands mid-batch."""
    import signal
    import threading

    from webfreeze.archives import gzip_members

    real = gzip_members.inflate

    def slow_inflate(buf, *args):
        view = memoryview(buf)  # held the way the real inflate holds it while it works
        try:
            time.sleep(0.6)
        finally:
            view.release()
        return real(buf, *args)

    monkeypatch.setattr(gzip_members, "inflate", slow_inflate)
    src = tmp_path / "example.warc.gz"
    src.write_bytes((samples / "example.warc.gz").read_bytes())
    main = threading.main_thread().ident
    timer = threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            import_files(tmp_path / "a.wfz", [src])
            time.sleep(5)  # not reached: the interrupt lands in the import
    finally:
        timer.cancel()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example.warc.gz"]
    assert [h for h in _held(src) if not h.startswith("fd ")] == []


def test_request_heads_cache_gives_parse_http_result():
    """A request head's header lines seen before come from the importer's cache, with the same
    result as parsing them (request line checked each time), also for a head without the blank
    line after it (pywb's iana.warc.gz) and for one the cache must refuse."""
    from webfreeze.archives import fast_import as fi

    def outcome(fn):
        try:
            http, start = fn()[:2]
        except fi.Fallback:
            return "fallback"
        return http.protocol, http.statusline, list(http.headers), start

    heads = fi._RequestHeads()
    blocks = [
        b"GET /a HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\nbody",
        b"POST /b HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
        b"GET /c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n",  # no blank line: runs to the end
        b"GET /d HTTP/1.1\r\nHost: example.com\r\nAccept: */*",
        b"BREW /e HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",  # unusual method: refused
        b"GET /f\rHTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",  # a stray CR in the request line
        b"\xffGET / HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
    ]
    for _ in range(2):  # the second round takes every kept entry from the cache
        for block in blocks:
            buf = b"xx" + block + b"yy"
            assert outcome(lambda: heads.parse(buf, 2, len(buf) - 2)) == \
                outcome(lambda: fi._parse_http(buf, True, 2, len(buf) - 2)), block
    assert len(heads.entries) == 1  # one header block, whatever follows it
