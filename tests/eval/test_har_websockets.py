"""HAR both ways, WebSockets too. ``eval export-har`` wrote a socket's entry with no messages
(Streamlit's page, replayed from the HAR, was blank, and nothing said so): each served socket's
entry now carries the recorded conversation that answered it in ``_webSocketMessages``, as Chromium
DevTools writes them, and the command says that Playwright's ``route_from_har`` serves none.
``archive import`` reads them back (ours and DevTools'), into conversations the replay serves."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import pytest
from cli_runner import run_cli
from session_task import write_suite

from webfreeze.archives import Archive, Exchange, new_archive_atomically
from webfreeze.replayer.websocket import SocketIndex
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

SITE = "http://talk.test"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z
PAGE = b"""<!DOCTYPE html><html><head><title>Talk</title></head><body><ul id="out"></ul><script>
const ws = new WebSocket('ws://talk.test/ws'); ws.binaryType = 'arraybuffer';
ws.onopen = () => ws.send('hi');
ws.onmessage = (e) => { const li = document.createElement('li');
  li.textContent = typeof e.data === 'string' ? e.data : 'bytes ' + new Uint8Array(e.data).join(',');
  document.getElementById('out').append(li); };
</script></body></html>"""
MESSAGES = [(False, "welcome"), (True, "hi"), (False, b"\x00\x01\xff"), (False, "bye")]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def _recorded(archive) -> list:
    with Archive.open(archive) as arc:
        (rec,) = SocketIndex.from_archive(arc).recordings
    return [rec.url, [(m.from_client, m.data, m.time) for m in rec.messages]]


def test_an_exported_run_keeps_its_socket_s_conversation_and_imports_it_back(tmp_path):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    archive = tmp_path / "talk.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("session", source="test_har_websockets")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at=_iso(T0), status=200, reason="OK", session_id=sid,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=PAGE))
        arc.add_page(session_id=sid, url=SITE + "/", captured_at=_iso(T0), title="Talk", dom=PAGE)
        arc.put_document(f"websocket/{sid}/ws.json", {
            "version": 1, "url": "ws://talk.test/ws", "opened": T0 + 1, "closed_by_client": None, "close_code": None,
            "messages": [{"from_client": c, "type": "binary" if isinstance(m, bytes) else "text",
                          "content": m.hex() if isinstance(m, bytes) else m, "time": T0 + 1.5 + i}
                         for i, (c, m) in enumerate(MESSAGES)]})
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/", "recorded_by": "script",
                 "viewport": {"width": 1920, "height": 1080}, "steps": [
                     {"action": "navigate", "cause": "goto", "url": SITE + "/", "step": 0, "time": 1.0},
                     {"action": "answer", "target": None, "value": {"text": "bye"}, "url": SITE + "/", "step": 1,
                      "time": 2.0}]}
    task = {"id": "talk", "category": "sockets", "instruction": "What does the page say last?",
            "start_url": SITE + "/", "snapshot_time": _iso(T0), "ground_truth": {"answer": {"exact": "bye"}}}
    suite = write_suite(tmp_path / "suite", archive, "talk", [(task, reference)])
    done = run_cli("bench", "run", str(suite), "--agent", "reference", "--backend", "browser",
                   "--out", str(tmp_path / "run"), timeout=300)
    assert done.returncode == 0, done.stderr
    done = run_cli("eval", "export-har", str(tmp_path / "run"), "-o", str(tmp_path / "har"))
    assert done.returncode == 0, done.stderr
    assert ("note: 1 WebSocket written with its recorded conversation in _webSocketMessages (Chromium DevTools' "
            "field, which 'archive import' reads); Playwright's route_from_har serves no WebSocket") in done.stderr
    har = json.loads((tmp_path / "har" / "talk.har").read_text())
    (entry,) = [e for e in har["log"]["entries"] if e["request"]["url"].startswith("ws:")]
    assert entry["_resourceType"] == "websocket" and entry["response"]["status"] == 101
    assert entry["_webSocketMessages"] == [
        {"type": "receive", "time": T0 + 1.5, "opcode": 1, "data": "welcome"},
        {"type": "send", "time": T0 + 2.5, "opcode": 1, "data": "hi"},
        {"type": "receive", "time": T0 + 3.5, "opcode": 2, "data": base64.b64encode(b"\x00\x01\xff").decode()},
        {"type": "receive", "time": T0 + 4.5, "opcode": 1, "data": "bye"}]
    assert entry["startedDateTime"] == "2026-01-01T00:00:01.000Z"
    # back in: the same conversation, which the replay serves to the page whole
    back = tmp_path / "back.wfz"
    done = run_cli("archive", "import", str(tmp_path / "har" / "talk.har"), "--to", str(back))
    assert done.returncode == 0, done.stderr
    assert "1 WebSocket conversation" in done.stdout, done.stdout
    assert "not http(s)" not in done.stderr, done.stderr
    assert _recorded(back) == _recorded(archive)
    done = run_cli("replay", "check", str(back), "--report", str(tmp_path / "check"), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 page: 0 with misses" in done.stdout + done.stderr


def test_a_devtools_websocket_entry_imports_as_a_conversation(tmp_path):
    # Chromium DevTools' "Save all as HAR with content": a wss entry, a binary frame in base64, a
    # ping (opcode 9) left out
    entry = {"startedDateTime": "2025-03-01T10:00:01.000Z", "time": 0, "_resourceType": "websocket",
             "request": {"method": "GET", "url": "wss://dev.test/live", "headers": []},
             "response": {"status": 101, "headers": [{"name": "Sec-WebSocket-Protocol", "value": "v2"}],
                          "content": {"size": 0, "mimeType": "x-unknown"}},
             "_webSocketMessages": [
                 {"type": "send", "time": 1740823201.5, "opcode": 1, "data": "subscribe"},
                 {"type": "receive", "time": 1740823201.6, "opcode": 2, "data": base64.b64encode(b"\x08\x01").decode()},
                 {"type": "receive", "time": 1740823201.7, "opcode": 9, "data": ""}]}
    path = tmp_path / "devtools.har"
    bare = {k: v for k, v in entry.items() if k != "_webSocketMessages"}  # (a socket's entry without them)
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "WebInspector"}, "entries": [entry, bare]}}))
    done = run_cli("archive", "import", str(path), "--to", str(tmp_path / "dev.wfz"))
    assert done.returncode == 0, done.stderr
    assert "note: 1 har: WebSocket entry without _webSocketMessages record(s) not stored" in done.stderr, done.stderr
    with Archive.open(tmp_path / "dev.wfz") as arc:
        (rec,) = SocketIndex.from_archive(arc).recordings
    assert (rec.url, rec.protocol, rec.opened) == ("wss://dev.test/live", "v2", 1740823201.0)
    assert [(m.from_client, m.data) for m in rec.messages] == [(True, "subscribe"), (False, b"\x08\x01")]
    path.write_text(json.dumps({"log": {"entries": [{**entry, "_webSocketMessages": [{"type": "receive", "opcode": 2,
                                                                                       "data": "not base64!"}]}]}}))
    done = run_cli("archive", "import", str(path), "--to", str(tmp_path / "bad.wfz"))
    assert done.returncode != 0 and "_webSocketMessages[0].data is not valid base64" in done.stderr, done.stderr
    assert not (tmp_path / "bad.wfz").exists()


def test_a_har_page_s_record_is_its_document_as_received_and_the_check_says_so(tmp_path):
    """A HAR keeps no DOM: the page record an import makes holds the document as received, the
    shell a script-drawn page (Solara's) builds on. `replay check` warned that the page 'replays
    with other text than the capture' (0.071); it now says why in a note, not a warning."""
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    html = ("<!DOCTYPE html><html><head><title>Shell</title></head><body><p>Loading</p><script>"
            "document.body.innerHTML = '<p>' + 'Widgets drawn by the page script. '.repeat(20) + '</p>';"
            "</script></body></html>")
    har = {"log": {"version": "1.2", "creator": {"name": "WebInspector"},
                   "pages": [{"startedDateTime": "2025-03-01T10:00:00.000Z", "id": "page_1", "title": "Shell",
                              "pageTimings": {}}],
                   "entries": [{"pageref": "page_1", "startedDateTime": "2025-03-01T10:00:00.100Z", "time": 1,
                                "_resourceType": "document",
                                "request": {"method": "GET", "url": "http://shell.test/", "headers": []},
                                "response": {"status": 200, "headers": [{"name": "Content-Type", "value": "text/html"}],
                                             "content": {"size": len(html), "mimeType": "text/html", "text": html}}}]}}
    path = tmp_path / "shell.har"
    path.write_text(json.dumps(har))
    done = run_cli("archive", "import", str(path), "--to", str(tmp_path / "shell.wfz"))
    assert done.returncode == 0, done.stderr
    done = run_cli("replay", "check", str(tmp_path / "shell.wfz"), "--report", str(tmp_path / "check"), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "other text than the capture" not in done.stderr, done.stderr
    assert "note: 1 page imported from a HAR holds the document as received" in done.stderr, done.stderr
    report = json.loads((tmp_path / "check" / "report.json").read_text())
    assert report["pages"][0]["dom_as_received"] is True
