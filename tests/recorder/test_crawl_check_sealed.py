"""The crawl's check loads each page from the archive alone: nothing it does reaches the site. A
page that sends a beacon as it is left (``navigator.sendBeacon`` on ``pagehide``: Wagtail's editor
releases its editing session so) sent it past the check's routes, through the crawl's recording
proxy, to the live site, which answered the logged-out check with a redirect to its login page,
recorded into the archive. A page the check loads sends no beacon now."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# the beacon says whether the replay's runtime ran in the page (the check's replay injects it)
PAGE = b"""<!doctype html><html><head><title>Editor</title></head><body><h1>Editor</h1><a href="/other">other</a>
<script>addEventListener('pagehide',
  () => navigator.sendBeacon('/release', typeof __wfSockets === 'number' ? 'replayed' : 'live'));</script>
</body></html>"""


def test_the_crawl_s_check_sends_nothing_to_the_site(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    beacons: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            body = PAGE.replace(b"Editor</h1>", b"Other</h1>") if self.path == "/other" else PAGE
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            beacons.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = cli("record", "crawl", "http://editor.test/", "--resolve", f"editor.test=127.0.0.1:{server.server_address[1]}",
                "--archive", tmp_path / "editor.wfz", "--depth", "1", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0 and "(complete)" in r.stdout, r.stdout + r.stderr
    assert b"replayed" not in beacons, beacons  # (the captures' own, as a person leaves a page, may come)
