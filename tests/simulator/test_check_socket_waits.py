"""The checks' replays (the crawl's check, `replay check`: Playwright's sync API, settled by
``wait_settled``) keep the WebSocket rule's waits: a push the recording got after a POST the page
makes as it loads (marimo instantiates its kernel so) comes once the replay has answered that
POST, and the settle waits for it; a push that followed a POST the page has not made (the person's
later action) is not shown."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.recorder.page_check import wait_loaded
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.replay_route import ReplayRoute

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://kernel.test"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z
PAGE = b"""<!DOCTYPE html><html><head><title>Kernel</title></head><body><ul id="out"></ul><script>
const ws = new WebSocket('ws://kernel.test/ws');
ws.onmessage = (e) => { const li = document.createElement('li'); li.textContent = e.data;
  document.getElementById('out').append(li); };
ws.onopen = () => fetch('/api/instantiate', {method: 'POST', body: '{}'});
</script></body></html>"""


def _at(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def test_a_push_after_the_page_s_own_post_comes_and_one_after_a_later_action_does_not(tmp_path):
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import launch_chromium, new_context, track_inflight, track_live_timers

    path = tmp_path / "kernel.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_check_socket_waits")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at=_at(T0), status=200, reason="OK",
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=PAGE,
                                  session_id=sid))
        for rel, t, body in (("/api/instantiate", T0 + 2, b"{}"), ("/api/set", T0 + 10, b'{"name": "Ada"}')):
            arc.add_exchange(Exchange(url=SITE + rel, method="POST", req_body=body,
                                      req_headers=[("Content-Type", "text/plain;charset=UTF-8")], captured_at=_at(t),
                                      status=200, reason="OK", resp_headers=[("Content-Type", "application/json")],
                                      payload=b"{}", session_id=sid))
        arc.put_document(f"websocket/{sid}/ws.json", {
            "version": 1, "url": "ws://kernel.test/ws", "opened": T0 + 1, "closed_by_client": None, "close_code": None,
            "messages": [{"from_client": False, "type": "text", "time": t, "content": text}
                         for t, text in ((T0 + 1.5, "connected"), (T0 + 3, "kernel ready"), (T0 + 11, "Hello, Ada!"))]})
    route = ReplayRoute(path)
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            context = new_context(browser)
            track_live_timers(context)
            route.attach(context)
            page = context.new_page()
            inflight = track_inflight(page)
            with route.serving(_at(T0)):
                page.goto(SITE + "/", wait_until="load", timeout=120_000)
                wait_loaded(page, inflight, route.sockets)
                shown = page.locator("#out").inner_text()
                missing = list(route.missing.values())
        finally:
            browser.close()
    assert missing == []
    assert shown.split("\n") == ["connected", "kernel ready"], shown
