"""A page that asks one request again and again while it loads, fed by the replay: a long poll the
replay answers at once once its recorded answers are used (Syncthing's `/rest/events`, 2,006 of
2,123 requests in 8 s), or, in direct mode, a handshake whose next answer never comes (Transmission's
JSON-RPC: a 409 with a session id, then the same call again; direct mode gives every ask the
capture nearest the page's time, the 409: 1,590 of them in 3 s). `replay check` passed both pages
without a word (the text still near the capture's); it now says which request looped, how often,
and, in direct mode, to check in proxy mode, where the handshake moves on."""

from __future__ import annotations

import json

import pytest
from cli_runner import run_cli

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://loops.test"
POLL = """<!DOCTYPE html><html><head><title>Events</title></head><body><p>Events</p><ul id="out"></ul><script>
(async () => { for (let i = 0; i < 400; i++) { const r = await fetch('/events?since=3'); await r.text(); }
  document.getElementById('out').textContent = 'gave up'; })();
</script></body></html>"""
HANDSHAKE = """<!DOCTYPE html><html><head><title>Torrents</title></head><body><p>Torrents</p><ul id="out"></ul><script>
(async () => { let id = '';
  for (let i = 0; i < 400; i++) {
    const r = await fetch('/rpc', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Session-Id': id},
                                   body: '{"method":"torrent-get"}'});
    if (r.status !== 409) { document.getElementById('out').textContent = (await r.json()).torrents; return; }
    id = r.headers.get('X-Session-Id'); } })();
</script></body></html>"""


def _archive(path, page: str, exchanges: list) -> None:
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_check_loops")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                  session_id=sid, resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                  payload=page.encode()))
        for i, (method, rel, status, headers, body, req_body) in enumerate(exchanges):
            arc.add_exchange(Exchange(url=SITE + rel, method=method, captured_at=f"2026-01-01T00:00:0{1 + i}Z",
                                      status=status, reason="OK", session_id=sid, resp_headers=headers,
                                      payload=body, req_body=req_body,
                                      req_headers=[("Content-Type", "application/json")] if req_body else []))
        arc.add_page(session_id=sid, url=SITE + "/", captured_at="2026-01-01T00:00:00.500Z", title="Page",
                     dom=b"<html><body><p>Events</p></body></html>")


def test_a_long_poll_the_replay_answers_at_once_is_said_to_loop(tmp_path):
    archive = tmp_path / "poll.wfz"
    _archive(archive, POLL, [("GET", "/events?since=3", 200, [("Content-Type", "application/json")], b"[]", None)])
    r = run_cli("replay", "check", archive, "--report", tmp_path / "check", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("warning: 1 page asked one request again and again while it loaded (most: 400 times GET "
            f"{SITE}/events?since=3, on {SITE}/)") in r.stderr, r.stderr
    (page,) = json.loads((tmp_path / "check" / "report.json").read_text())["pages"]
    assert page["asked_again"] == {"method": "GET", "url": f"{SITE}/events?since=3", "count": 400}


@pytest.mark.parametrize("mode", ["proxy", "direct"])
def test_a_handshake_direct_mode_never_moves_on_is_said_to_loop_there(tmp_path, mode):
    archive = tmp_path / "rpc.wfz"
    body = b'{"method":"torrent-get"}'
    _archive(archive, HANDSHAKE, [
        ("POST", "/rpc", 409, [("Content-Type", "text/html"), ("X-Session-Id", "abc")], b"<h1>409</h1>", body),
        ("POST", "/rpc", 200, [("Content-Type", "application/json")], b'{"torrents":"sample-data.bin"}', body)])
    r = run_cli("replay", "check", archive, "--mode", mode, "--report", tmp_path / "check", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (page,) = json.loads((tmp_path / "check" / "report.json").read_text())["pages"]
    if mode == "proxy":  # (the 409, then its retry answered as recorded: the list shows)
        assert "asked_again" not in page and "asked one request again" not in r.stderr, r.stderr
        return
    assert page["asked_again"]["count"] >= 100 and page["asked_again"]["method"] == "POST", page
    assert "in direct mode every ask gets the capture nearest the page's time" in r.stderr, r.stderr
