"""The archive store on real SQLite: dedup, lookups, transactions, locking, documents."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from webfreeze.archives import Archive, ArchiveError, ArchiveLocked, Exchange, new_archive_atomically
from webfreeze.archives.bodykey import body_key


def _ex(sid, url, when="2024-05-01T10:00:00Z", payload=b"<html>hello</html>", **kw):
    return Exchange(url=url, captured_at=when, status=200, reason="OK",
                    resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=payload,
                    session_id=sid, **kw)


@pytest.fixture
def arc(tmp_path):
    a = Archive.create(tmp_path / "a.wfz", creator="tests", description="store tests", license="CC0")
    yield a
    a.close()


def test_payloads_are_stored_once_across_sessions(arc):
    s1 = arc.new_session("crawl")
    s2 = arc.new_session("crawl")
    body = b"<html>" + b"same page " * 500 + b"</html>"
    for sid in (s1, s2):
        for i in range(3):
            arc.add_exchange(_ex(sid, f"http://example.com/p{i}", payload=body))
    n_blobs, stored = arc.conn.execute(
        "SELECT count(*), sum(stored_size) FROM blobs WHERE digest IN (SELECT payload FROM exchanges)").fetchone()
    assert n_blobs == 1
    assert stored < len(body)  # zstd-compressed
    assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 6
    digest = arc.lookup_exact("GET", "http://example.com/p1")[0].response.payload_digest
    assert arc.get_blob(digest) == body


def test_index_columns_and_lookups(arc):
    sid = arc.new_session("crawl")
    arc.add_exchange(_ex(sid, "http://Example.com/a/b?y=2&x=1", when="2024-01-01T00:00:00Z", payload=b"one"))
    arc.add_exchange(_ex(sid, "http://Example.com/a/b?y=2&x=1", when="2024-03-01T00:00:00Z", payload=b"two"))
    arc.add_exchange(_ex(sid, "http://example.com/a/c", payload=b"three"))
    arc.add_exchange(_ex(sid, "http://other.org/", payload=b"four"))
    row = arc.lookup_exact("GET", "http://Example.com/a/b?y=2&x=1")[0]
    assert row.surt == "com,example)/a/b?x=1&y=2"
    assert row.mime == "text/html"
    assert row.captured_at == "2024-01-01T00:00:00.000000Z"
    # recorded order for repeated identical requests
    assert [r.payload() for r in arc.lookup_exact("GET", "http://Example.com/a/b?y=2&x=1")] == [
        b"one", b"two"]
    under = arc.lookup_surt("com,example)/a/", prefix=True)
    assert sorted(r.url for r in under) == ["http://Example.com/a/b?y=2&x=1"] * 2 + ["http://example.com/a/c"]
    assert arc.lookup_surt("org,other)/")[0].url == "http://other.org/"
    assert arc.closest("http://example.com/a/b?x=1&y=2", "2024-02-20").captured_at.startswith("2024-03-01")
    assert arc.closest("http://example.com/a/b?x=1&y=2", "20240110").captured_at.startswith("2024-01-01")
    assert arc.closest("http://nowhere.example/", "2024") is None


def test_the_lookups_use_indexes(arc):
    plans = {
        "exact": "SELECT * FROM exchanges WHERE method=? AND url=? AND body_key=? ORDER BY captured_at, id",
        "surt": "SELECT * FROM exchanges WHERE surt >= ? AND surt < ? ORDER BY surt, captured_at, id",
        "closest": "SELECT * FROM exchanges WHERE surt=? AND captured_at<=? ORDER BY captured_at DESC, id DESC",
    }
    for name, sql in plans.items():
        plan = " ".join(r[3] for r in arc.conn.execute("EXPLAIN QUERY PLAN " + sql, ("a",) * sql.count("?")))
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (name, plan)


def test_post_bodies_get_canonical_keys(arc):
    sid = arc.new_session("crawl")
    arc.add_exchange(_ex(sid, "http://example.com/search", method="POST",
                         req_headers=[("Content-Type", "application/x-www-form-urlencoded")], req_body=b"q=cats&page=2"))
    row = arc.lookup_exact("POST", "http://example.com/search", body_key("application/x-www-form-urlencoded",
                                                                           b"page=2&q=cats"))[0]
    assert row.request.payload() == b"q=cats&page=2"


def test_body_key_canonical_forms():
    form = "application/x-www-form-urlencoded"
    assert body_key(form, b"b=2&a=1") == body_key(form, b"a=1&b=2") != body_key(form, b"a=1&b=3")
    assert body_key("application/json", b'{"a": 1, "b": [1, 2]}') == body_key("application/json", b'{"b":[1,2],"a":1}')
    assert body_key("application/json", b'{"a": 1}') != body_key("application/json", b'{"a": 2}')
    mp1 = (b"--XyZ\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\ncats\r\n--XyZ--\r\n")
    mp2 = (b"--other\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\ncats\r\n--other--\r\n")
    assert body_key("multipart/form-data; boundary=XyZ", mp1) == body_key("multipart/form-data; boundary=other", mp2)
    assert body_key("application/octet-stream", b"\x00\x01").startswith("sha256:")
    # an empty FormData (Wagtail's editing-session ping): the closing delimiter alone, its boundary
    # random; the form with no field, whatever the boundary (its digest made each one unique)
    empty = [(f"multipart/form-data; boundary=----WebKitFormBoundary{b}", f"------WebKitFormBoundary{b}--\r\n".encode())
             for b in ("AbC123", "zz9")]
    assert body_key(*empty[0]) == body_key(*empty[1]) == "form:" != body_key("multipart/form-data; boundary=x", b"--y--")
    assert body_key(None, b"") == ""
    assert body_key("application/json", b"{not json").startswith("sha256:")


def test_failed_transaction_leaves_nothing(arc):
    sid = arc.new_session("crawl")
    with pytest.raises(RuntimeError):
        with arc.transaction():
            arc.add_exchange(_ex(sid, "http://example.com/x", payload=b"to be rolled back" * 10))
            raise RuntimeError("boom")
    assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 0
    assert arc.conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 1  # only the header dictionary
    # the store still works after a rollback, and dedup does not trust a rolled-back blob
    arc.add_exchange(_ex(sid, "http://example.com/x", payload=b"to be rolled back" * 10))
    row = arc.lookup_exact("GET", "http://example.com/x")[0]
    assert row.payload() == b"to be rolled back" * 10


def test_single_writer(tmp_path):
    path = tmp_path / "w.wfz"
    Archive.create(path).close()
    writer = Archive.open(path, write=True)
    try:
        with pytest.raises(ArchiveLocked):
            Archive.open(path, write=True)
        reader = Archive.open(path)  # readers are never blocked
        assert reader.meta()["format"] == "webfreeze-archive"
        reader.close()
    finally:
        writer.close()
    Archive.open(path, write=True).close()


def test_metadata_and_documents(arc):
    meta = arc.meta()
    assert meta["creator"] == "tests" and meta["license"] == "CC0" and meta["format_version"] == 1
    arc.set_meta("replay_rules", {"ignore_params": ["_"]})
    assert arc.meta()["replay_rules"] == {"ignore_params": ["_"]}
    suite = {"version": 1, "tasks": [{"id": "t1", "instruction": "find the paper"}]}
    arc.put_document("suites/demo.json", suite)
    assert arc.get_document("suites/demo.json") == suite
    assert arc.document_names() == ["suites/demo.json"]
    with pytest.raises(ArchiveError):
        arc.put_document("../escape.json", {})
    with pytest.raises(ArchiveError):
        arc.get_document("missing.json")


def test_a_replaced_document_leaves_no_blob_behind_unless_something_names_it(arc):
    """A crawl rewrites its state document after every page: each replaced version's blob goes
    (500 versions of a growing state left 4 MiB for `archive gc` before). A blob that anything
    else names stays: the same bytes as an exchange's payload, or as another document."""
    from webfreeze.archives.maintenance import _unreferenced_blobs

    blobs = arc.conn.execute("SELECT count(*) FROM blobs").fetchone()[0]  # (the header dictionary's)
    for n in range(50):
        arc.put_document("crawl/state", {"seen": [f"http://a.test/{i}" for i in range(n)], "done": n})
    assert arc.get_document("crawl/state")["done"] == 49
    assert _unreferenced_blobs(arc) == []
    assert arc.conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == blobs + 1
    shared = {"same": "bytes"}
    body = json.dumps(shared, sort_keys=True).encode()
    arc.put_document("a", shared)
    sid = arc.new_session("crawl")
    arc.add_exchange(_ex(sid, "http://a.test/doc.json", payload=body))  # an exchange names those bytes now
    arc.put_document("a", {"other": 1})
    (ex,) = arc.exchanges(prefix="http://a.test/doc.json")
    assert ex.body() == body
    # the same through the bulk writer (imports): a payload it stores is a document's blob already
    from webfreeze.archives.bulk import BulkWriter

    arc.put_document("d", {"bulk": 1})
    bulk_body = json.dumps({"bulk": 1}, sort_keys=True).encode()
    writer = BulkWriter(arc)
    writer.add_exchange(_ex(sid, "http://a.test/bulk.json", payload=bulk_body))
    writer.flush()
    arc.put_document("d", {"bulk": 2})
    (ex,) = arc.exchanges(prefix="http://a.test/bulk.json")
    assert ex.body() == bulk_body
    arc.put_document("b", {"twin": True})
    arc.put_document("c", {"twin": True})  # the same bytes under another name
    arc.put_document("b", {"twin": False})
    assert arc.get_document("c") == {"twin": True}
    assert _unreferenced_blobs(arc) == []


def test_pages_hold_screenshot_and_dom(arc):
    sid = arc.new_session("crawl")
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    pid = arc.add_page(session_id=sid, url="http://example.com/", captured_at="2024-05-01T00:00:00Z",
                       title="Example", screenshot=png, dom=b"<html><body>Example</body></html>")
    page = next(arc.pages())
    assert page.id == pid and page.title == "Example"
    assert page.screenshot() == png


def test_reading_is_plain_data(tmp_path):
    """Another lab reads an archive with nothing but sqlite3, json and zstandard."""
    import zstandard

    path = tmp_path / "plain.wfz"
    with Archive.create(path) as a:
        sid = a.new_session("crawl")
        a.add_exchange(_ex(sid, "http://example.com/", payload=b"<p>plain</p>" * 100))
    conn = sqlite3.connect(path)
    url, headers, digest = conn.execute("SELECT url, resp_headers, payload FROM exchanges").fetchone()
    codec, data = conn.execute("SELECT codec, data FROM blobs WHERE digest=?", (digest,)).fetchone()
    assert codec == "zstd"
    assert zstandard.ZstdDecompressor().decompress(data) == b"<p>plain</p>" * 100
    # header lists: compact JSON, zstd against the dictionary the archive itself carries
    dict_digest = json.loads(conn.execute("SELECT value FROM meta WHERE key='header_dictionary'").fetchone()[0])
    (raw_dict,) = conn.execute("SELECT data FROM blobs WHERE digest=?", (dict_digest,)).fetchone()
    raw_dict = zstandard.ZstdDecompressor().decompress(raw_dict)
    d = zstandard.ZstdCompressionDict(raw_dict, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    assert json.loads(zstandard.ZstdDecompressor(dict_data=d).decompress(headers)) == [
        ["Content-Type", "text/html; charset=utf-8"]]
    assert url == "http://example.com/"


def test_not_an_archive(tmp_path):
    junk = tmp_path / "junk.wfz"
    junk.write_bytes(b"this is not sqlite")
    with pytest.raises(ArchiveError, match="not a webfreeze archive"):
        Archive.open(junk)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(ArchiveError, match="not a webfreeze archive"):
        Archive.open(other)
    with pytest.raises(ArchiveError, match="no such archive"):
        Archive.open(tmp_path / "missing.wfz")


def test_atomic_creation_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "new.wfz"
    with pytest.raises(RuntimeError):
        with new_archive_atomically(target) as a:
            a.new_session("x")
            raise RuntimeError("fail midway")
    assert list(tmp_path.iterdir()) == []



def test_a_new_archive_is_published_in_wal_mode(tmp_path):
    target = tmp_path / "new.wfz"
    with new_archive_atomically(target) as a:
        sid = a.new_session("x")
        with a.transaction():
            for i in range(3):
                a.add_exchange(_ex(sid, f"http://a.example/{i}", payload=b"p%d" % i))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.wfz"]
    conn = sqlite3.connect(target)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    with Archive.open(target) as arc:
        assert [r["url"] for r in arc.conn.execute("SELECT url FROM exchanges ORDER BY id")] == [
            f"http://a.example/{i}" for i in range(3)]


def test_a_statement_left_unfinished_stops_the_publication_cleanly(tmp_path):
    """A block that leaves a query half-read holds a read transaction, and SQLite then refuses the
    switch to WAL: one line, and nothing is left (a bug of the caller's, surfaced, not hidden)."""
    target = tmp_path / "new.wfz"
    with pytest.raises(ArchiveError, match="cannot finish the new archive: cannot change into wal mode"):
        with new_archive_atomically(target) as a:
            sid = a.new_session("x")
            with a.transaction():
                for i in range(3):
                    a.add_exchange(_ex(sid, f"http://a.example/{i}"))
            cur = a.conn.execute("SELECT id FROM exchanges")
            assert cur.fetchone() is not None  # two rows left unread: the statement stays open
    assert list(tmp_path.iterdir()) == []


def fds_on(path) -> int:
    """How many descriptors this process has open on the file ``path``."""
    real = os.path.realpath(path)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == real
        except OSError:  # closed meanwhile (the listing's own)
            pass
    return count


WRITE_ONE = """
import sys
from webfreeze.archives import Archive, Exchange
with Archive.open(sys.argv[1], write=True) as a:
    a.add_exchange(Exchange(url="http://new.example/", captured_at="2024-01-01T00:00:00Z", status=200, reason="OK",
                            resp_headers=[], payload=b"new", session_id=a.new_session("x")))
"""


@pytest.mark.parametrize("touch", ["digest", "open-close", "nothing"])
def test_reading_an_archive_again_keeps_this_process_locks(tmp_path, touch):
    """SQLite's locks are POSIX locks: closing any descriptor of the file in this process used to
    drop them under an open reader, so a writer in another process, closing, took itself for the
    last connection and deleted the WAL and shared-memory files under that reader."""
    import subprocess
    import sys

    from webfreeze.archives import archive_digest

    target = tmp_path / "a.wfz"
    with Archive.create(target) as a:
        a.add_exchange(_ex(a.new_session("x"), "http://a.example/"))
    assert fds_on(target) == 0
    reader = Archive.open(target)
    try:
        cur = reader.conn.execute("SELECT id FROM exchanges")
        assert cur.fetchone() is not None  # a read in progress
        if touch == "digest":
            archive_digest(target)
        elif touch == "open-close":
            Archive.open(target).close()
        subprocess.run([sys.executable, "-c", WRITE_ONE, str(target)], check=True, timeout=60)
        # the reader's locks held: the writer did not take the files away from under it
        assert (tmp_path / "a.wfz-wal").exists() and (tmp_path / "a.wfz-shm").exists()
        cur.close()
        assert reader.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 2  # and it sees the write
    finally:
        reader.close()
    assert fds_on(target) == 0  # what was parked is closed with the last connection
    digest = archive_digest(target)  # nothing of this process has it open now: nothing parked is left
    assert digest.startswith("sha256:") and Archive.open(target, write=True).close() is None


def test_reading_an_open_archive_again_and_again_reuses_its_descriptors(tmp_path):
    """Descriptors parked while the archive is open are reused by the next read, not piled up."""
    from webfreeze.archives import archive_digest

    target = tmp_path / "a.wfz"
    with Archive.create(target) as a:
        a.add_exchange(_ex(a.new_session("x"), "http://a.example/"))
    with Archive.open(target) as reader:
        assert reader.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 1
        counts = []
        for _ in range(30):
            Archive.open(target).close()
            archive_digest(target)
            Archive.open(target, write=True).close()
            counts.append(fds_on(target))
        assert max(counts) == counts[0], counts  # the first round's spares serve every later one
    assert fds_on(target) == 0


def test_an_archive_never_closed_gives_its_descriptors_back_when_collected(tmp_path):
    import gc

    from webfreeze.archives import archive_digest

    target = tmp_path / "a.wfz"
    Archive.create(target).close()
    forgotten = Archive.open(target)
    archive_digest(target)  # parked: the forgotten archive is open
    forgotten.conn.close()
    assert fds_on(target) == 1  # the parked one (SQLite closed its own)
    del forgotten
    gc.collect()
    assert fds_on(target) == 0


def test_a_forked_child_closing_a_writer_leaves_the_parent_its_lock(tmp_path):
    """flock belongs to the open file, which a fork shares: the child must not give it up."""
    import subprocess
    import sys

    target = tmp_path / "a.wfz"
    Archive.create(target).close()
    writer = Archive.open(target, write=True)
    try:
        pid = os.fork()
        if pid == 0:  # the child: close its copy and leave at once
            try:
                writer.close()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        other = subprocess.run([sys.executable, "-c", "import sys; from webfreeze.archives import Archive; "
                                "Archive.open(sys.argv[1], write=True).close()", str(target)],
                               capture_output=True, text=True, timeout=60)
        assert other.returncode != 0 and "already open for writing by another process" in other.stderr
    finally:
        writer.close()
    assert Archive.open(target, write=True).close() is None


def test_a_write_the_disk_refused_during_the_background_sync_stops_the_import(tmp_path, monkeypatch):
    """MOCK (named as such): os.fdatasync fails once with ENOSPC, as a disk that filled up and
    emptied again reports a lost write-back (once, to the first sync that asks; a real one needs a
    loop device on a full tmpfs and root). The import must fail and publish nothing."""
    import errno
    import io
    import random

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from webfreeze.archives.importer import import_files

    src = tmp_path / "big.warc.gz"
    rnd = random.Random(5)
    with open(src, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for i in range(12):  # 3 MB of incompressible payloads: several flushes of 1 MB
            body = rnd.randbytes(256 * 1024)
            http = StatusAndHeaders("200 OK", [("Content-Type", "application/octet-stream")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(f"http://big.example/{i}", "response",
                                                          payload=io.BytesIO(body), length=len(body), http_headers=http))
    real, calls = os.fdatasync, []

    def refusing(fd):
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", refusing)
    with pytest.raises(ArchiveError, match="cannot write the new archive: No space left on device"):
        import_files(tmp_path / "new.wfz", [src])
    assert calls  # the background sync ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.warc.gz"]
    monkeypatch.setattr(os, "fdatasync", real)
    import_files(tmp_path / "new.wfz", [src])  # and with a disk that takes it, the same import lands
    with Archive.open(tmp_path / "new.wfz") as arc:
        assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 12


def test_verify_accepts_an_empty_multipart_body_keyed_by_its_digest(arc):
    """An archive written before empty multipart bodies were keyed as a form holds their digest
    key: ``archive verify`` accepts it (and still refuses any other key)."""
    import hashlib

    from webfreeze.archives.verify import verify

    ct, body = "multipart/form-data; boundary=----B1", b"------B1--\r\n"
    sid = arc.new_session("crawl")
    eid = arc.add_exchange(Exchange(url="http://example.com/ping", method="POST", captured_at="2024-03-01T12:00:00Z",
                                    status=200, req_headers=[("Content-Type", ct)], req_body=body, payload=b"ok", resp_headers=[],
                                    session_id=sid))
    assert arc.conn.execute("SELECT body_key FROM exchanges WHERE id=?", (eid,)).fetchone()[0] == "form:"
    for key, problems in ((f"sha256:{hashlib.sha256(body).hexdigest()}", 0), ("form:a=1", 1)):
        with arc.transaction():
            arc.conn.execute("UPDATE exchanges SET body_key=? WHERE id=?", (key, eid))
        found = [p for p in verify(arc.path).problems if "request body key" in p.what]
        assert len(found) == problems, found
