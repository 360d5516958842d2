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


# A worker that closes itself after the socket's first message: no message or close event reaches
# it after that, so the deliveries it still waited for were never given back to its page.
# The rally's page, with a listener of its own that captures (at the worker, capturing listeners run
# before the others): it hears the worker's messages and none of the runtime's.
LISTENING = PAGE.replace("w.onmessage", "window.heard = [];\nw.addEventListener('message', (e) => "
                         "window.heard.push(e.data), {capture: true});\nw.onmessage")
CLOSING = """const ws = new WebSocket('ws://worker-check.test/feed');
ws.onmessage = (e) => { postMessage('worker heard ' + e.data); close(); };"""


@pytest.mark.parametrize("workers_counted", [True, False], ids=["worker-sockets", "page-sockets-only"])
def test_a_page_counts_its_workers_deliveries_only_where_a_server_marks_them(tmp_path, workers_counted):
    """The runtime's count of a page's pending socket deliveries takes its dedicated workers' in
    only with ``Replay.worker_sockets`` (a replay server answers workers' sockets and marks their
    batches: ``replay check``'s proxy); elsewhere (the crawl's check, whose workers' sockets nothing
    marks) a worker's socket would hold the page's settle to its time bound. A worker that closes
    itself gives its share back."""
    from playwright.sync_api import sync_playwright

    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import launch_chromium, new_context

    archive = tmp_path / "workers.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_check_worker_sockets")
        for rel, ctype, body in (("/", "text/html; charset=utf-8", LISTENING), ("/w.js", "text/javascript", WORKER),
                                 ("/closing", "text/html; charset=utf-8", PAGE.replace("'/w.js'", "'/closing.js'")),
                                 ("/closing.js", "text/javascript", CLOSING)):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
        arc.put_document(f"websocket/{sid}/feed.json", rally_recording("ws://worker-check.test/feed", ROUNDS, OPENED))
    count = "() => window.__wfSockets"
    with ReplayServer(archive, mode="proxy", port=0, miss_report=None, confdir=tmp_path / "ca") as server, \
            sync_playwright() as pw:
        server.replay.sockets, server.replay.worker_sockets = True, workers_counted
        browser = launch_chromium(pw, proxy=server.url, bypass_internal=False, shell=True)
        page = new_context(browser).new_page()
        server.reset(0, when="2026-01-01T00:00:01Z")
        page.goto(SITE + "/")
        page.wait_for_function("() => document.body.innerText.includes('worker rally at 2')", timeout=60_000)
        seen = page.evaluate(count)  # mid-rally: the worker waits for its next ball
        page.wait_for_function("() => document.body.innerText.includes('worker rally at %d')" % ROUNDS,
                               timeout=60_000)
        page.wait_for_function("() => window.__wfSockets === 0", timeout=60_000)  # the last batch came
        assert (seen >= 1) if workers_counted else (seen == 0), seen
        assert page.evaluate("window.heard") == [f"worker rally at {n}" for n in range(ROUNDS + 1)]
        server.reset(0, when="2026-01-01T00:00:01Z")
        page.goto(SITE + "/closing")
        page.wait_for_function("() => document.body.innerText.includes('worker heard 0')", timeout=60_000)
        page.wait_for_function("() => window.__wfSockets === 0", timeout=60_000)  # (stuck at 1 before)
        browser.close()
