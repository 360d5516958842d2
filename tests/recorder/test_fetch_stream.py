"""Streams that never end, while recording.

A Gradio page with a ``demo.unload`` (or state to clean up) opens ``GET
/gradio_api/heartbeat/<session_hash>``: server-sent events that last as long as the page, a
heartbeat every 15 s. The browser never finishes it. Such an event stream is recorded as it stands
when the page lets it go, or when a crawl checks the page (``extra.open_stream``), so the check
finds it and a replay answers its events; a live fetch of one listens a few seconds, then records
it so. Any other answer that never ends (a log streamed as lines) is never recorded: a live fetch
of one gives up at its deadline, and a session says it was still coming.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Heartbeat(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        log = self.path.startswith("/log")  # (a log streamed as lines: not server-sent events)
        # (a heartbeat as Gradio's, slower: the next one only after a capture or a session is over;
        # anything else, ten a second)
        pause = 8.0 if "/heartbeat/" in self.path else 0.1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson" if log else "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:  # a heartbeat more often than any read times out, for as long as someone listens
                chunk = b'{"line": 1}\n' if log else b"event: heartbeat\ndata: {}\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(pause)
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
            outcome.append(proxy.fetch("GET", heartbeat + "/log", [], timeout=5, deadline=1))
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


def test_a_fetch_of_server_sent_events_records_them_as_they_stand(tmp_path, monkeypatch, heartbeat):
    from webfreeze.archives import Archive
    from webfreeze.recorder.proxy import RecordingProxy, open_for_recording

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    arc = open_for_recording(tmp_path / "rec.wfz")
    proxy = RecordingProxy(arc, port=0).start()
    try:
        status = proxy.fetch("GET", heartbeat + "/events/ab12", [("Accept", "text/event-stream")],
                             timeout=5, deadline=1)
    finally:
        proxy.stop()
        arc.close()
    assert status == (200, "OK")
    with Archive.open(tmp_path / "rec.wfz") as arc:
        [ex] = [e for e in arc.exchanges() if e.url.endswith("/events/ab12")]
        body = ex.response.payload()
        assert ex.extra.get("open_stream") is True, ex.extra
    # what came in the second it listened: whole events, a heartbeat every 0.1 s
    assert body.startswith(b"event: heartbeat\ndata: {}\n\n") and body.count(b"event: heartbeat") >= 2, body


PAGE = b"""<!doctype html><html><head><title>App</title></head><body><h1>App</h1><p id=out>Ready</p><script>
fetch('/gradio_api/heartbeat/ab12', {headers: {Accept: 'text/event-stream'}})
  .then((r) => r.body.getReader().read())
  .then(({value}) => { out.textContent = 'Listening: ' + new TextDecoder().decode(value).split('\\n')[0]; });
</script></body></html>"""
# (and a log that never ends, streamed as lines)
LOG_PAGE = PAGE.replace(b"</body>", b"<script>fetch('/log').then((r) => r.body.getReader().read())</script></body>")


class App(Heartbeat):
    def do_GET(self):
        page = {"/": PAGE, "/with-log": LOG_PAGE}.get(self.path)
        if page is None:
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)


def record_session(tmp_path, monkeypatch, cli, path: str):
    """``record session`` of the app's page at ``path``, its script waiting for the first event:
    (the CLI's result, the site's URL)."""
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
        r = cli("record", "session", site + path, "--archive", tmp_path / "a.wfz", "--trajectory",
                tmp_path / "t.json", "--script", tmp_path / "s.py", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    return r, site


def test_a_session_records_the_events_and_says_which_other_answers_were_still_coming(tmp_path, monkeypatch, cli):
    from webfreeze.archives import Archive

    r, site = record_session(tmp_path, monkeypatch, cli, "with-log")
    assert r.returncode == 0, r.stderr
    warning = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "still coming when the session ended" in warning[0], r.stderr
    assert f"GET {site}log" in warning[0] and "heartbeat" not in warning[0], warning
    with Archive.open(tmp_path / "a.wfz") as arc:
        streams = {e.url: (e.extra, e.response.payload()) for e in arc.exchanges()
                   if "/heartbeat/" in e.url or e.url.endswith("/log")}
    # the events the page had when the browser closed; the log is not in the archive
    assert list(streams) == [f"{site}gradio_api/heartbeat/ab12"], streams
    extra, body = streams[f"{site}gradio_api/heartbeat/ab12"]
    assert extra.get("open_stream") is True and body.startswith(b"event: heartbeat\n"), extra


def test_a_session_does_not_wait_on_the_events_a_page_keeps_open(tmp_path, monkeypatch, cli):
    from webfreeze.archives import Archive

    r, _ = record_session(tmp_path, monkeypatch, cli, "")
    assert r.returncode == 0 and "warning:" not in r.stderr, r.stderr
    with Archive.open(tmp_path / "a.wfz") as arc:
        [body] = [e.response.payload() for e in arc.exchanges() if "/heartbeat/" in e.url]
    # one event: the session ended once the page was quiet, not at its bound (15 s), past the
    # next heartbeat (8 s)
    assert body == b"event: heartbeat\ndata: {}\n\n", body


def test_a_crawl_records_the_events_a_page_keeps_open_and_its_replay_answers_them(tmp_path, monkeypatch, cli):
    """The crawl's check finds the heartbeat (recorded as it stood before the check): the page is
    complete, without waiting for a live fetch, and the agent environment's page gets the events,
    twice alike, in an episode that is not compromised."""
    from webfreeze.archives import Archive
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
    from webfreeze.simulator.env import EnvConfig, WebEnv
    from webfreeze.simulator.provenance import OPEN_STREAM_WHY

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    # (were it fetched live, 60 s, and the page incomplete: the test would see it)
    monkeypatch.setenv("WEBFREEZE_STREAM_DEADLINE_S", "60")
    server = ThreadingHTTPServer(("127.0.0.1", 0), App)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    archive = tmp_path / "a.wfz"
    try:
        r = cli("record", "crawl", "http://app.test/", "--resolve", f"app.test=127.0.0.1:{server.server_port}",
                "--archive", archive, "--depth", "0", timeout=400)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0 and "(complete)" in r.stdout, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        [ex] = [e for e in arc.exchanges() if "/heartbeat/" in e.url]
        # (one event: the capture did not wait on the stream for its whole bound, 10 s)
        assert ex.extra.get("open_stream") is True and ex.response.payload().count(b"event:") == 1, ex.extra
    shown = []
    for _ in range(2):
        web = WebEnv(EnvConfig(archive, backend="browser"))
        try:
            obs, _ = web.reset(options={"task": {"id": "hb", "start_url": "http://app.test/", "instruction": "read"}})
            trajectory = web.trajectory()
            stream = [a for a in trajectory["replay"]["start"]["answers"] if "/heartbeat/" in a["url"]]
            shown.append((obs["axtree_text"], trajectory["replay"]["compromised"], stream))
        finally:
            web.close()
    assert shown[0] == shown[1]
    text, compromised, stream = shown[0]
    assert "Listening: event: heartbeat" in text and compromised is False, text
    # (exact, and the trajectory says the replay ended a stream the site kept open)
    assert [(a["level"], a.get("why")) for a in stream] == [("exact", OPEN_STREAM_WHY)], stream
