"""`replay check` and a WebSocket a worker opens. Playwright routes no worker's socket: Chromium sends
it to the check's replay server (its proxy), which answers it from the archive's recording. The
check listed every such socket as a page's miss all the same (it counted the page's ``websocket``
event, which Chromium fires only for sockets Playwright did not route); it now takes the server's
word: answered, or a miss where the recording is missing or the conversation parts."""

from __future__ import annotations

import json
import os

import pytest
from cli_runner import run_cli
from ws_recording import rally_recording

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://worker-check.test"
ROUNDS = 4
PAGE = """<!DOCTYPE html><html><head><title>Worker socket</title></head><body><p id="out">no ball yet</p><script>
const w = new Worker('/w.js' + location.search);
w.onmessage = (e) => { document.getElementById('out').textContent = e.data; };
</script></body></html>"""
# The worker is busy for 400 ms before each answer (as on a loaded machine), longer than the check's
# network quiet: its rally was taken for settled at its first ball before the page counted the
# worker's pending deliveries. (Its clock is the runtime's virtual one: an event's timeStamp is not.)
WORKER = """const ws = new WebSocket('ws://worker-check.test/feed' + location.search);
const busy = (ms) => { const t0 = new Event('x').timeStamp; while (new Event('x').timeStamp - t0 < ms); };
ws.onmessage = (e) => { busy(400); postMessage('worker rally at ' + e.data); if (Number(e.data) < %d) ws.send(e.data); };
ws.onerror = () => postMessage('worker socket failed');""" % ROUNDS
OPENED = 1767225600.5


PLAIN = """<!DOCTYPE html><html><head><title>Plain worker</title></head><body><p id="out">no word yet</p><script>
const w = new Worker('/plain.js');
w.onmessage = (e) => { document.getElementById('out').textContent = e.data; };
</script></body></html>"""


@pytest.mark.parametrize("ctype", ["text/plain", "text/html; charset=utf-8"])
def test_a_worker_script_served_as_text_runs_in_the_replay_as_it_did_live(tmp_path, ctype):
    """A classic worker's script answered ``text/plain`` (or ``text/html``: a server that knows no
    ``.js``) runs as a worker in Chromium; the replay's runtime starts workers from a blob that loads
    their script with ``importScripts``, which refuses such a type: the worker never ran, the page
    stayed as before its message, and nothing was counted. It now reads it with a synchronous XHR
    when ``importScripts`` refuses it. (Answered ``text/html``, the replay also put its runtime into
    the script, as into a page: the worker failed on its first ``<``; only documents get it now.)"""
    archive = tmp_path / "plain.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_check_worker_sockets")
        for rel, ctype, body in (("/plain", "text/html; charset=utf-8", PLAIN),
                                 ("/plain.js", ctype, "postMessage('the worker ran: ' + (6 * 7));")):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
        arc.add_page(session_id=sid, url=SITE + "/plain", captured_at="2026-01-01T00:00:01Z", title="Plain worker",
                     dom=PLAIN.replace("no word yet", "the worker ran: 42").encode(), extra={"complete": True})
    r = run_cli("replay", "check", archive, "--report", tmp_path / "report",
                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    (page,) = json.loads((tmp_path / "report" / "report.json").read_text())["pages"]
    assert page["text_similarity"] == 1.0 and page["misses"] == [], page
    assert r.returncode == 0, r.stdout + r.stderr


def test_replay_check_takes_the_server_s_word_on_a_worker_s_socket(tmp_path):
    archive = tmp_path / "worker.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_check_worker_sockets")
        for rel, ctype, body in (("/", "text/html; charset=utf-8", PAGE), ("/?room=2", "text/html; charset=utf-8", PAGE),
                                 ("/w.js", "text/javascript", WORKER), ("/w.js?room=2", "text/javascript", WORKER)):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
        arc.put_document(f"websocket/{sid}/feed.json", rally_recording("ws://worker-check.test/feed", ROUNDS, OPENED))
        # the pages as the crawl saw them: the rally played to its end (room 2's socket was not recorded)
        for rel, shown in (("/", f"worker rally at {ROUNDS}"), ("/?room=2", "worker socket failed")):
            dom = PAGE.replace("no ball yet", shown).encode()
            arc.add_page(session_id=sid, url=SITE + rel, captured_at="2026-01-01T00:00:01Z", title="Worker socket",
                         dom=dom, extra={"complete": True})
    r = run_cli("replay", "check", archive, "--report", tmp_path / "report",
                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    pages = {p["url"]: p for p in report["pages"]}
    assert pages[f"{SITE}/"]["misses"] == [], pages[f"{SITE}/"]  # answered from the recording: no miss
    assert pages[f"{SITE}/"]["text_similarity"] == 1.0, pages[f"{SITE}/"]  # the whole rally, settled
    assert pages[f"{SITE}/?room=2"]["misses"] == ["ws://worker-check.test/feed?room=2"], pages[f"{SITE}/?room=2"]
    assert r.returncode != 0 and report["summary"]["pages_with_misses"] == 1, r.stdout + r.stderr
