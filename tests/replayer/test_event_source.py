"""The replay runtime's ``EventSource`` (replayer/determinism.py) reads a stream of server-sent
events as Chromium's own does: held against Chromium's ``EventSource`` on the same bytes, from a
real server on loopback (events, their types, data and ids, the connection's states, the
reconnection's delay and its ``Last-Event-ID``, and a failed reconnection)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from webfreeze.replayer.determinism import inject, runtime_script
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# Cut where a reader could go wrong: a byte order mark, CR, LF and CRLF line ends (a CRLF split
# between two writes), comments, a field without a colon, two spaces after one, an id holding NUL
# (ignored), an id with no value (the last id emptied), a retry that is not a number (ignored) and
# one that is, an unknown field, a custom event type, and an event the stream ends in the middle of.
CHUNKS = [
    b"\xef\xbb\xbf: a comment\r\n",
    b"data: first\r",
    b"\n\r\n",
    b"event: custom\rdata: line one\rdata:line two\r\r",
    b"id: 7\ndata\n\n",
    b"id: bad\x00id\ndata: after a NUL id\n\n",
    b"retry: 12x\ndata: a retry ignored\n\n",
    "event: custom\ndata: {\"k\": \"\u00e9t\u00e9\"}\nid\n\n".encode(),
    b"data:  two spaces\nunknown: field\n\n",
    b"id: 42\nretry: 150\ndata: last\n\n",
    b"data: never finished",
]
PAGE = """<!doctype html><html><head><title>Events</title></head><body><script>
const got = [];
const es = new EventSource('/stream?v=' + VARIANT);
const note = (e) => got.push([e.type, e.data, e.lastEventId, e.origin === location.origin, e instanceof MessageEvent]);
es.onmessage = note;
es.addEventListener('custom', note);
es.onopen = () => got.push(['open', es.readyState]);
es.onerror = () => { got.push(['error', es.readyState]); if (es.readyState === EventSource.CLOSED) window.done = got; };
got.push(['made', es.readyState, es.url.endsWith('/stream?v=' + VARIANT), es.withCredentials,
          EventSource.CONNECTING, EventSource.OPEN, EventSource.CLOSED]);
</script></body></html>"""


class _Site(BaseHTTPRequestHandler):
    seen: dict = {}

    def log_message(self, *args):
        pass

    def do_GET(self):
        parts = urlsplit(self.path)
        variant = parse_qs(parts.query).get("v", [""])[0]
        if parts.path.startswith("/page/"):
            variant = parts.path.rsplit("/", 1)[1]
            html = PAGE.replace("VARIANT", json.dumps(variant)).encode()
            if variant == "replay":
                html = inject(html, runtime_script("2024-03-01T12:00:00Z", 7))
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)
            return
        asked = self.seen.setdefault(variant, [])
        asked.append({"last": self.headers.get("Last-Event-ID"), "accept": self.headers.get("Accept"),
                      "at": time.monotonic()})
        if len(asked) > 1:  # the reconnection: refused, so the source fails for good
            self.send_response(204)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in CHUNKS:
            self.wfile.write(chunk)
            self.wfile.flush()
            time.sleep(0.02)
        self.close_connection = True


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import launch_chromium

    with sync_playwright() as pw:
        b = launch_chromium(pw)
        try:
            yield b
        finally:
            b.close()


def _events(browser, site: str, variant: str) -> tuple[list, bool]:
    """What the page's source gave, and whether it was Chromium's own."""
    page = browser.new_page()
    try:
        page.goto(f"{site}/page/{variant}")
        page.wait_for_function("window.done !== undefined", timeout=15_000)
        own = page.evaluate("Function.prototype.toString.call(EventSource).includes('[native code]')")
        return page.evaluate("window.done"), own
    finally:
        page.close()


def test_the_replay_event_source_reads_a_stream_as_chromium_does(site, browser):
    _Site.seen.clear()
    native, chromium_own = _events(browser, site, "native")
    replayed, runtime_own = _events(browser, site, "replay")
    assert (chromium_own, runtime_own) == (True, False)  # (the replay's is the runtime's)
    assert replayed == native
    # (what Chromium's own reader gave, so that a change in both is seen)
    assert [e[:3] for e in native if e[0] not in ("made", "open", "error")] == [
        ["message", "first", ""], ["custom", "line one\nline two", ""], ["message", "", "7"],
        ["message", "after a NUL id", "7"], ["message", "a retry ignored", "7"], ["custom", '{"k": "été"}', ""],
        ["message", " two spaces", ""], ["message", "last", "42"]]
    assert native[0] == ["made", 0, True, False, 0, 1, 2]
    assert native[1] == ["open", 1] and native[-2:] == [["error", 0], ["error", 2]]
    assert all(e[3] is True and e[4] is True for e in native if e[0] in ("message", "custom"))
    # the reconnection: after the stream's retry (150 ms), with the last id, asking for events
    for variant in ("native", "replay"):
        first, again = _Site.seen[variant]
        assert (first["last"], again["last"]) == (None, "42"), variant
        assert first["accept"] == again["accept"] == "text/event-stream", variant
        assert again["at"] - first["at"] >= 0.15, variant
