"""`replay check` answers like `replay serve` (fuzzy defaults: a person browsing gets the nearest
capture), the agent environment honestly (a document, an XHR or a WebSocket whose meaningful
parameters differ from every capture's is a miss). A page whose socket URL carried an id the replay
draws differently (NiceGUI's ``tab_id`` from a crawl's earlier page, in ``sessionStorage``) was
"0 misses, text similarity 1.0" in the check and a compromised episode in the environment, with no
word of it in the check. The check now lists such answers per page (``fuzzy``), counts them, and
says so on stderr; the environment misses the very same URLs."""

from __future__ import annotations

import json
import os

import pytest
from cli_runner import run_cli
from ws_recording import handshake

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://fuzzy-check.test"
# the page asks with a stamp its recording never saw (the live page's came from elsewhere)
PAGE = """<!DOCTYPE html><html><head><title>Stamped</title></head><body><p id="api">no answer</p><p id="ws">no socket</p>
<script>
fetch('/api?item=7&stamp=replayed').then((r) => r.text()).then((t) => { document.getElementById('api').textContent = t; });
const ws = new WebSocket('ws://fuzzy-check.test/feed?doc=replayed');
ws.onmessage = (e) => { document.getElementById('ws').textContent = e.data; };
</script></body></html>"""
CAPTURED_TEXT = "Stamped item 7 in stock news of the day"


def _archive(tmp_path):
    """The page, its XHR and its socket, each recorded with a stamp the replayed page does not send."""
    archive = tmp_path / "fuzzy.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_check_fuzzy")
        for rel, ctype, body in (("/", "text/html; charset=utf-8", PAGE),
                                 ("/api?item=7&stamp=recorded", "text/plain", "item 7 in stock")):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
        arc.put_document(f"websocket/{sid}/feed.json", {
            "version": 1, "url": "ws://fuzzy-check.test/feed?doc=recorded", "opened": 1767225600.5,
            "closed_by_client": None, "close_code": None,
            "messages": [{"from_client": False, "type": "text", "content": "news of the day", "time": 1767225600.6}]})
        arc.add_page(session_id=sid, url=SITE + "/", captured_at="2026-01-01T00:00:01Z", title="Stamped",
                     dom=f"<html><body><p>{CAPTURED_TEXT}</p></body></html>".encode())
    return archive


def test_a_fuzzy_document_xhr_or_socket_is_named_by_the_check_and_missed_by_the_environment(tmp_path):
    archive = _archive(tmp_path)
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home"))
    r = run_cli("replay", "check", archive, "--report", tmp_path / "report", env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr  # no miss for a person browsing
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    page = report["pages"][0]
    fuzzy = [SITE + "/api?item=7&stamp=replayed", "ws://fuzzy-check.test/feed?doc=replayed"]
    assert page["misses"] == [] and page["fuzzy"] == fuzzy, page
    assert (report["summary"]["pages_answered_fuzzily"], report["summary"]["fuzzy_requests"]) == (1, 2)
    assert page["text_similarity"] == 1.0  # (the nearest captures gave the page its captured text)
    assert "answered only fuzzily" in (tmp_path / "report" / "report.html").read_text()
    assert (f"note: 1 page got 2 documents, XHR or WebSockets answered only fuzzily (another capture's, its "
            f"parameters unlike the page's request): the agent environment's honest matching misses them, or "
            f"answers them fuzzily where the archive's rules say a parameter may differ (ignorable_params), and its "
            f"episodes are replay-compromised either way (first: {SITE}/: {fuzzy[0]})") in r.stderr, r.stderr
    # the agent environment: the same two URLs, misses, and the episode compromised
    from webfreeze.simulator.env import EnvConfig, WebEnv

    with WebEnv(EnvConfig(archive, backend="browser")) as web:
        obs, _ = web.reset(options={"task": {"id": "t", "start_url": SITE + "/", "instruction": "read"}})
        trajectory = web.trajectory()
    missed = sorted(a["url"] for a in trajectory["replay"]["start"]["answers"] if a["level"] == "miss")
    assert missed == fuzzy and trajectory["replay"]["compromised"] is True, trajectory["replay"]
    assert "item 7" not in obs["axtree_text"]


def test_replay_serve_counts_its_fuzzy_answers_sockets_too(tmp_path):
    """`replay serve` gives a person the nearest capture (an XHR's, a WebSocket's) and says how
    many answers were such when it stops; a socket answered so was counted as a plain hit."""
    import http.client
    import signal
    import socket
    import subprocess
    import sys
    import time

    archive = _archive(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "replay", "serve", str(archive), "--mode", "direct",
                             "--port", str(port), "--miss-report", str(tmp_path / "m.jsonl")],
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")))
    try:
        deadline = time.monotonic() + 120  # (the server's start, slow on a loaded machine)
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/2026id_/" + SITE + "/api?item=7&stamp=replayed")
                answer = conn.getresponse()
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert (answer.read(), answer.getheader("X-Webfreeze-Match")) == (b"item 7 in stock", "fuzzy")
        conn.close()
        with socket.create_connection(("127.0.0.1", port), timeout=60) as ws:
            head, _ = handshake(ws, "/2026id_/ws://fuzzy-check.test/feed?doc=replayed")
        assert head.startswith(b"HTTP/1.1 101") and b"X-Webfreeze-Match: fuzzy" in head, head
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert ("served 2 requests: 2 from the archive (2 of them another capture's, the nearest: fuzzy), "
            "0 by site models, 0 misses") in err, err
