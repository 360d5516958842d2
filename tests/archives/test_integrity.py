"""Integrity first (issue 44): a blob changed behind the archive's back makes export and pack refuse
in one line naming the record, writing nothing; a single-byte flip in an index page of the file
either fails ``archive verify`` or leaves every lookup correct."""

from __future__ import annotations

import random
import sqlite3

from cli_runner import invoke

from webfreeze.archives import Archive, ArchiveError, Exchange, blobs
from webfreeze.archives.urlkey import surt_key
from webfreeze.archives.verify import verify

FLIPS = 40


def _build(path, n: int = 40):
    with Archive.create(path, creator="tests") as arc:
        sid = arc.new_session("crawl")
        for i in range(n):
            method = "POST" if i % 5 == 0 else "GET"
            arc.add_exchange(Exchange(
                url=f"http://shop.lab/item/{i:03d}?q={i * 7}", captured_at=f"2024-05-01T10:{i % 60:02d}:00Z",
                status=200, reason="OK", method=method, session_id=sid,
                resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                payload=f"<html><p>item {i}</p>{'x' * (i * 13)}</html>".encode(),
                req_headers=[("Content-Type", "application/x-www-form-urlencoded")] if method == "POST" else [],
                req_body=f"qty={i}&colour=red".encode() if method == "POST" else None))
    return path


def _change_a_payload(path) -> str:
    """Replace one payload blob's stored bytes by a valid encoding of other bytes of the same size
    (the zstd frame's own checksum is then fine: only the digest can tell)."""
    conn = sqlite3.connect(path)
    try:
        digest, size = conn.execute("SELECT payload, payload_size FROM exchanges ORDER BY id LIMIT 1 OFFSET 3").fetchone()
        codec, stored = blobs.encode(b"Z" * size)
        conn.execute("UPDATE blobs SET codec=?, data=?, stored_size=? WHERE digest=?", (codec, stored, len(stored), digest))
        conn.commit()
    finally:
        conn.close()
    return digest


def test_a_changed_blob_makes_export_and_pack_refuse_naming_the_record(tmp_path):
    arc = _build(tmp_path / "a.wfz")
    digest = _change_a_payload(arc)
    assert not verify(arc).ok
    for args, out in ((("archive", "export", arc, "--format", "warc", "-o"), tmp_path / "x.warc.gz"),
                      (("archive", "export", arc, "--format", "wacz", "-o"), tmp_path / "x.wacz"),
                      (("archive", "pack", arc, "-o"), tmp_path / "p.wfz")):
        r = invoke(*args, out)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        line = r.stderr.strip()
        assert len(line.splitlines()) == 1 and "damaged" in line and "exchange 4 " in line and digest in line, line
        assert not out.exists()
    before = arc.read_bytes()
    r = invoke("archive", "pack", arc)  # in place: refused, the file as it was
    assert r.returncode == 1 and "damaged" in r.stderr and arc.read_bytes() == before


def _index_pages(path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT name, rootpage FROM sqlite_master WHERE type='index' ORDER BY name").fetchall()
    finally:
        conn.close()


def _lookups(path) -> dict:
    """What every lookup of every exchange finds (ids), by exact key and by SURT key."""
    with Archive.open(path) as arc:
        keys = [(e.method, e.url, e.body_key) for e in arc.index_entries(kind=None)]
        return {k: ([r.id for r in arc.lookup_exact(*k)], [r.id for r in arc.lookup_surt(surt_key(k[1]))])
                for k in keys}


def test_each_single_byte_flip_of_an_index_fails_verify_or_leaves_every_lookup_correct(tmp_path):
    good = _build(tmp_path / "good.wfz", n=60)
    want = _lookups(good)
    data = good.read_bytes()
    page_size = int.from_bytes(data[16:18], "big") or 65536
    pages = []
    for name, root in _index_pages(good):  # each index's root page, where its cells are
        header = (root - 1) * page_size + (100 if root == 1 else 0)
        content = int.from_bytes(data[header + 5:header + 7], "big") or page_size  # start of the cells
        if content < page_size:  # (an empty index has none)
            pages.append((name, root, content))
    assert {name for name, _, _ in pages} >= {"ix_exchanges_exact", "ix_exchanges_surt"}
    rnd = random.Random(44)
    caught = 0
    for n in range(FLIPS):
        name, root, content = pages[n % len(pages)]
        at = (root - 1) * page_size + rnd.randrange(max(content, 8), page_size)
        flipped = bytearray(data)
        flipped[at] ^= 1 << rnd.randrange(8)
        path = tmp_path / f"flip-{n}.wfz"
        path.write_bytes(bytes(flipped))
        try:
            ok = verify(path).ok
        except (ArchiveError, sqlite3.DatabaseError):
            ok = False
        if not ok:
            caught += 1
            r = invoke("archive", "verify", path) if n < 3 else None
            assert r is None or r.returncode == 1
        else:
            assert _lookups(path) == want, f"flip {n} at byte {at} ({name}) passed verify but a lookup is wrong"
        path.unlink()
    assert caught > 0  # (the flips do reach the indexes: else this proves nothing)


def test_verify_names_the_index_that_does_not_match_its_table(tmp_path):
    """An index that lost a row (written so, not by a flip) is named by its own check."""
    from webfreeze.archives.verify import index_problems

    arc = _build(tmp_path / "a.wfz", n=10)
    conn = sqlite3.connect(arc)
    try:
        conn.execute("PRAGMA writable_schema=ON")
        # drop the index's entries by rebuilding it with a partial definition under the same name
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name='ix_exchanges_surt'").fetchone()[0]
        conn.execute("DROP INDEX ix_exchanges_surt")
        conn.execute(sql + " WHERE id > 3")
        conn.execute("UPDATE sqlite_master SET sql=? WHERE name='ix_exchanges_surt'", (sql,))
        conn.commit()
    finally:
        conn.close()
    with Archive.open(arc) as a:
        problems = index_problems(a)
    assert [p.where for p in problems] == ["index ix_exchanges_surt"], problems
    assert "3 row(s) missing" in problems[0].what
    assert not verify(arc).ok
