"""A crawl's live fetch of what its check missed ends, even for a stream that never does.

A Gradio page with a ``demo.unload`` (or state to clean up) opens ``GET
/gradio_api/heartbeat/<session_hash>``: server-sent events that last as long as the page, a
heartbeat every 15 s. The browser never finishes it, so the capture has no exchange for it, the
check misses it, and the crawl fetched it live through the recording proxy with a 30 s socket
timeout that each heartbeat reset: the crawl never ended. The fetch now has a deadline for the
whole answer, and a crawl names such a request as a stream that was still open.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Heartbeat(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:  # a heartbeat more often than any read times out, for as long as someone listens
                chunk = b"event: heartbeat\ndata: {}\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def heartbeat():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Heartbeat)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_fetch_of_a_never_ending_stream_ends_at_its_deadline(tmp_path, monkeypatch, heartbeat):
    from webfreeze.recorder.proxy import RecordingProxy, open_for_recording

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    arc = open_for_recording(tmp_path / "rec.wfz")
    proxy = RecordingProxy(arc, port=0).start()
    outcome = []

    def fetch():
        try:
            outcome.append(proxy.fetch("GET", heartbeat + "/gradio_api/heartbeat/ab12",
                                       [("Accept", "text/event-stream")], timeout=5, deadline=1))
        except Exception as exc:  # noqa: BLE001 (what it raised is the outcome)
            outcome.append(exc)

    worker = threading.Thread(target=fetch, daemon=True)
    try:
        worker.start()
        worker.join(20)  # (a bound for the test only: the fetch's own is 1 s)
        assert not worker.is_alive(), "the fetch of a stream that never ends never returned"
    finally:
        proxy.stop()
        arc.close()
    assert len(outcome) == 1 and isinstance(outcome[0], TimeoutError), outcome
    assert "still streaming" in str(outcome[0]), outcome
