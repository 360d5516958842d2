"""An event stream recorded while it still came (``extra.open_stream``: Gradio's heartbeat, recorded
as it stood) leaves in a WARC as a response record with ``WARC-Truncated: disconnect`` (WARC 1.1,
5.13: what had come when the connection went), and comes back from it marked as before, by either
import path."""

from __future__ import annotations

import pytest
from warcio.archiveiterator import ArchiveIterator

from webfreeze.archives import Archive, Exchange

EVENTS = b"data: ALIVE\n\n"


@pytest.mark.parametrize("fast", [True, False], ids=["fast-import", "general-import"])
def test_an_open_stream_leaves_truncated_and_comes_back_open(tmp_path, cli_here, monkeypatch, fast):
    src = tmp_path / "src.wfz"
    with Archive.create(src) as arc:
        sid = arc.new_session("crawl")
        for url, ctype, extra in (("http://app.test/gradio_api/heartbeat/ab12", "text/event-stream",
                                   {"open_stream": True, "dechunked": True}),
                                  ("http://app.test/done", "text/event-stream", {"dechunked": True})):
            arc.add_exchange(Exchange(url=url, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype), ("Transfer-Encoding", "chunked")],
                                      payload=EVENTS if extra.get("open_stream") else EVENTS + b"data: BYE\n\n",
                                      session_id=sid, extra=extra, req_headers=[("Accept", "text/event-stream")]))
    warc = tmp_path / "out.warc.gz"
    r = cli_here("archive", "export", src, "--format", "warc", "--output", warc)
    assert r.returncode == 0, r.stderr
    with open(warc, "rb") as f:
        truncated = {rec.rec_headers.get_header("WARC-Target-URI"): (rec.rec_headers.get_header("WARC-Truncated"),
                                                                     rec.raw_stream.read())
                     for rec in ArchiveIterator(f) if rec.rec_type == "response"}
    # (the open stream's chunks end where they stood: no last chunk, the connection went)
    assert truncated == {"http://app.test/gradio_api/heartbeat/ab12": ("disconnect", b"d\r\n" + EVENTS + b"\r\n"),
                         "http://app.test/done": (None, b"18\r\n" + EVENTS + b"data: BYE\n\n\r\n0\r\n\r\n")}
    if not fast:
        monkeypatch.setenv("WEBFREEZE_NO_FASTWARC", "1")
    back = tmp_path / "back.wfz"
    r = cli_here("archive", "import", warc, "--to", back)
    assert r.returncode == 0, r.stderr
    with Archive.open(back) as arc:
        got = {e.url: (e.extra.get("open_stream", False), e.response.payload()) for e in arc.exchanges()}
    assert got == {"http://app.test/gradio_api/heartbeat/ab12": (True, EVENTS),
                   "http://app.test/done": (False, EVENTS + b"data: BYE\n\n")}
    # and `archive show` says which answer it is
    shown = {url: cli_here("archive", "show", back, url).stdout.splitlines()[1]
             for url in ("http://app.test/gradio_api/heartbeat/ab12", "http://app.test/done")}
    assert shown["http://app.test/gradio_api/heartbeat/ab12"].startswith("# an event stream still open"), shown
    assert not shown["http://app.test/done"].startswith("#"), shown
