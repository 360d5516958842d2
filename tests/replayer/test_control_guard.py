"""The control endpoints (``/_webfreeze/state``, ``reset``, ...) answer tools, not pages: in direct
mode every replayed page is of the replay server's own origin, so a page's script could otherwise
read the site state or reset the session. A real Chromium page of that origin is refused; a tool
(urllib) and an address typed by the user are answered."""

from __future__ import annotations

import json
import urllib.request

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.server import ReplayServer
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path, launch_chromium, new_context

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

T0 = "2024-03-01T12:00:00Z"
TS = "20240301120000"
PAGE = "http://site.test/"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("guard") / "a.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_control_guard")
        arc.add_exchange(Exchange(url=PAGE, captured_at=T0, status=200, session_id=sid,
                                  payload=b"<!doctype html><html><head></head><body><p>archived</p></body></html>",
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
    srv = ReplayServer(path, mode="direct", seed=3).start()
    yield srv
    srv.stop()


def _tool(srv, what: str, method: str = "GET"):
    req = urllib.request.Request(f"{srv.url}/_webfreeze/{what}", method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, json.loads(resp.read())


# what a page's script may try: read the state, reset the session (a POST, as a form could too)
PAGE_SCRIPT = """async () => {
  const out = {};
  for (const [name, init] of [["state", {}], ["status", {}], ["reset?seed=99", {method: "POST"}]]) {
    try { const r = await fetch("/_webfreeze/" + name, init); out[name] = [r.status, await r.text()]; }
    catch (e) { out[name] = [0, String(e)]; }
  }
  return out;
}"""


def test_a_page_of_the_replay_origin_cannot_reach_the_control_endpoints(server):
    from playwright.sync_api import sync_playwright

    assert _tool(server, "status")[0] == 200
    with sync_playwright() as pw:
        browser = launch_chromium(pw, proxy=None, bypass_internal=False)
        try:
            context = new_context(browser)
            page = context.new_page()
            # the listing and a replayed page: both of the server's origin, neither rewritten nor shimmed
            # for the listing, so its fetch goes to the control endpoints as written
            for url in (f"{server.url}/", f"{server.url}/{TS}/{PAGE}"):
                page.goto(url, wait_until="load")
                got = page.evaluate(PAGE_SCRIPT)
                if url.endswith("/"):
                    for name, (status, text) in got.items():
                        assert status == 403 and "tools, not pages" in text, (name, status, text)
                else:  # the shim sends a replayed page's root-relative URLs into the archive: no control
                    assert all(status != 200 or "seed" not in text for status, text in got.values()), got
            # an address the user types is answered (no page made the request)
            resp = page.goto(f"{server.url}/_webfreeze/status")
            assert resp.status == 200 and json.loads(page.inner_text("body"))["seed"] == 3
            context.close()
        finally:
            browser.close()
    # the session was not reset by the page: the seed is the server's still; a tool may reset it
    assert _tool(server, "status")[1]["seed"] == 3
    assert _tool(server, "reset?seed=4", "POST") == (200, {"reset": True, "seed": 4})
    assert _tool(server, "state")[0] == 200
