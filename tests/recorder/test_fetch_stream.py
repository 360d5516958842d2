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


PAGE = b"""<!doctype html><html><head><title>App</title></head><body><h1>App</h1><p id=out>Ready</p><script>
fetch('/gradio_api/heartbeat/ab12', {headers: {Accept: 'text/event-stream'}})
  .then((r) => r.body.getReader().read()).then(() => { out.textContent = 'Listening'; });
</script></body></html>"""


class App(Heartbeat):
    def do_GET(self):
        if self.path != "/":
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)


def test_a_session_says_which_answers_were_still_coming_when_it_ended(tmp_path, monkeypatch, cli):
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WEBFREEZE_STREAM_DEADLINE_S", "5")
    server = ThreadingHTTPServer(("127.0.0.1", 0), App)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}/"
    (tmp_path / "s.py").write_text("def run(page):\n    page.get_by_text('Listening').wait_for()\n")
    try:
        r = cli("record", "session", site, "--archive", tmp_path / "a.wfz", "--trajectory", tmp_path / "t.json",
                "--script", tmp_path / "s.py", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    warning = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "still coming when the session ended" in warning[0], r.stderr
    assert f"GET {site}gradio_api/heartbeat/ab12" in warning[0], warning


def test_a_crawl_of_a_page_with_a_never_ending_stream_ends_incomplete_and_says_why(tmp_path, monkeypatch, cli):
    # (the live fetch gives the stream 5 s, not its default 60 s, before the crawl gives up on it)
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WEBFREEZE_STREAM_DEADLINE_S", "5")
    server = ThreadingHTTPServer(("127.0.0.1", 0), App)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = cli("record", "crawl", "http://app.test/", "--resolve", f"app.test=127.0.0.1:{server.server_port}",
                "--archive", tmp_path / "a.wfz", "--depth", "0", timeout=400)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 3, r.stdout + r.stderr
    assert ("incomplete: http://app.test/ (missing: http://app.test/gradio_api/heartbeat/ab12 (still streaming "
            "after 5 s: an answer that never ends is never recorded))") in r.stdout, r.stdout
    # nothing a --recheck could repair: not suggested
    assert "repair with" not in r.stderr and "a stream that never ends" in r.stderr, r.stderr
