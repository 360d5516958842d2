"""The archive's typed read API on real SQLite: exchanges, pages and documents as records, their
filters, and both sides of an exchange decoded and raw."""

from __future__ import annotations

import gzip

import pytest

import webfreeze
from webfreeze.archives import Archive, ArchiveError, DocumentRecord, Exchange, ExchangeRecord, PageRecord


@pytest.fixture
def arc(tmp_path):
    a = Archive.create(tmp_path / "r.wfz")
    sid = a.new_session("crawl")
    other = a.new_session("crawl")
    html = b"<html>" + b"hello " * 50 + b"</html>"
    a.add_exchange(Exchange(url="http://Example.com/a?b=1", captured_at="2024-01-01T00:00:00Z", status=200,
                            reason="OK", resp_headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
                            payload=gzip.compress(html, mtime=0), session_id=sid,
                            req_headers=[("Host", "Example.com"), ("Accept-Encoding", "gzip")]))
    a.add_exchange(Exchange(url="http://example.com/a/b", captured_at="2024-02-01T00:00:00Z", status=404,
                            resp_headers=[("Content-Type", "text/plain; charset=utf-8")], payload=b"gone",
                            session_id=sid))
    a.add_exchange(Exchange(url="http://example.com/form", captured_at="2024-03-01T00:00:00Z", status=303,
                            method="POST", resp_headers=[("Location", "/done")], session_id=other,
                            req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                            req_body=b"q=cats", extra={"dechunked": True}))
    a.add_exchange(Exchange(url="https://other.org/img.png", captured_at="2024-01-15T00:00:00Z", status=200,
                            resp_headers=[("Content-Type", "image/png")], payload=b"\x89PNG", session_id=other))
    a.add_page(session_id=sid, url="http://Example.com/a?b=1", captured_at="2024-01-01T00:00:01Z", title="A",
               dom=b"<html>dom</html>", screenshot=b"\x89PNG shot", extra={"depth": 0})
    a.put_document("suites/s.json", {"tasks": [1]})
    a.put_document("crawls/c.json", {"failed": []})
    yield a, html, sid, other, gzip.compress(html, mtime=0)
    a.close()


def test_exchanges_are_typed_with_both_sides(arc):
    a, html, sid, _, gz = arc
    first = next(a.exchanges())
    assert isinstance(first, ExchangeRecord)
    assert (first.url, first.method, first.status, first.session_id) == ("http://Example.com/a?b=1", "GET", 200, sid)
    assert first.captured_at == "2024-01-01T00:00:00.000000Z" and first.kind == "response"
    assert first.response.reason == "OK" and first.response.mime == "text/html"
    assert first.headers == [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    assert first.response.header("content-encoding") == "gzip"
    assert first.request.header("accept-encoding") == "gzip" and first.request.captured
    assert first.payload() == gz and first.body() == html  # raw as stored, decoded
    assert first.response.payload_size == len(gz)
    post = next(a.exchanges(method="post"))
    assert post.request.payload() == b"q=cats" and post.body_key == "form:q=cats"
    assert post.extra == {"dechunked": True} and post.payload() == b"" and post.body() == b""
    missing = next(a.exchanges(status=404))
    assert not missing.request.captured and missing.request.headers == [] and missing.request.payload() == b""


def test_exchange_filters(arc):
    a, _, sid, other, _ = arc
    urls = lambda **kw: [r.url for r in a.exchanges(**kw)]  # noqa: E731
    assert urls() == ["http://Example.com/a?b=1", "http://example.com/a/b", "http://example.com/form",
                      "https://other.org/img.png"]
    assert urls(prefix="http://example.com/a") == ["http://Example.com/a?b=1", "http://example.com/a/b"]
    assert urls(url="http://example.com/a/b") == ["http://example.com/a/b"]
    assert urls(host="EXAMPLE.com") == urls()[:3] and urls(host="other.org") == ["https://other.org/img.png"]
    assert urls(since="2024-01-10", until="2024-02-01") == ["http://example.com/a/b", "https://other.org/img.png"]
    assert urls(since="2024-02") == ["http://example.com/a/b", "http://example.com/form"]
    assert urls(mime="image/*") == ["https://other.org/img.png"] and urls(mime="text/plain") == ["http://example.com/a/b"]
    assert urls(session=other) == ["http://example.com/form", "https://other.org/img.png"]
    assert urls(body_key="form:q=cats") == ["http://example.com/form"]
    assert urls(order="time") == [urls()[0], urls()[3], urls()[1], urls()[2]]
    assert urls(order="url")[0] == "http://Example.com/a?b=1"
    assert urls(limit=2, offset=1) == urls()[1:3] and urls(host="example.com", limit=1, offset=1) == urls()[1:2]
    with pytest.raises(ValueError):
        list(a.exchanges(order="payload"))
    assert [e.url for e in a.index_entries()] == urls()
    assert a.exchange(2).url == "http://example.com/a/b" and a.exchange(99) is None


def test_copying_a_record_into_another_archive(arc, tmp_path):
    a, _, _, _, gz = arc
    with Archive.create(tmp_path / "copy.wfz") as b:
        sid = b.new_session("copy")
        for rec in a.exchanges():
            b.add_exchange(rec.to_exchange(session_id=sid))
        assert [(r.url, r.payload(), r.headers, r.request.headers, r.extra) for r in b.exchanges()] == \
            [(r.url, r.payload(), r.headers, r.request.headers, r.extra) for r in a.exchanges()]


def test_pages_and_documents_are_records_too(arc):
    a, *_ = arc
    (page,) = a.pages()
    assert isinstance(page, PageRecord) and page.title == "A" and page.extra == {"depth": 0}
    assert page.payload() == b"<html>dom</html>" and page.body() == "<html>dom</html>"
    assert page.screenshot() == b"\x89PNG shot" and page.dom() == b"<html>dom</html>"
    assert list(a.pages(since="2025")) == [] and [p.url for p in a.pages(url="http://Example.com/a?b=1")] == [page.url]
    docs = list(a.documents())
    assert all(isinstance(d, DocumentRecord) for d in docs)
    assert [d.name for d in docs] == ["crawls/c.json", "suites/s.json"]
    assert [d.name for d in a.documents(prefix="suites/")] == ["suites/s.json"]
    assert docs[1].body() == {"tasks": [1]} and docs[1].payload() == b'{"tasks": [1]}'
    counts = a.counts()
    assert (counts["exchanges"], counts["pages"], counts["documents"], counts["sessions"]) == (4, 1, 2, 2)
    assert not a.is_empty()


def test_a_body_that_cannot_be_decoded_is_one_line(tmp_path):
    with Archive.create(tmp_path / "bad.wfz") as a:
        sid = a.new_session("crawl")
        a.add_exchange(Exchange(url="http://x.test/", captured_at="2024", status=200, session_id=sid,
                                resp_headers=[("Content-Encoding", "gzip")], payload=b"not gzip"))
        rec = next(a.exchanges())
        assert rec.payload() == b"not gzip"
        with pytest.raises(ArchiveError, match="exchange 1 .http://x.test/.: gzip body is corrupt"):
            rec.body()
        assert a.is_empty() is False


def test_the_front_door_exports_the_read_api():
    for name in ("Archive", "Exchange", "ExchangeRecord", "PageRecord", "DocumentRecord", "open_archive"):
        assert getattr(webfreeze, name) is not None
    from webfreeze import archives

    for name in ("info", "diff", "merge", "gc", "pack", "export", "import_files"):
        assert callable(getattr(archives, name)), name
    from webfreeze.archives.verify import verify

    assert callable(verify)
