"""The crawl's check replays each page from the archive; Playwright routes no request a redirect
makes, so the next hop of a redirect the replay answered went to the network, through the
recording proxy, live: recorded again as the check's cookie-less browser got it (Calibre-Web's
sort links answer 308; after a login the crawl recorded their logged-out 302 to the login page,
which a later replay then served to logged-in agents). The hop is now answered from the archive
too (the route's own replay server): the site sees each page once, and nothing is recorded twice."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))


class Site:
    """/ links to /shelf/ (308 to /shelf), which is only for visitors with the cookie / set."""

    def __init__(self):
        self.hits: list[tuple[str, bool]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                signed = "member=1" in (self.headers.get("Cookie") or "")
                site.hits.append((self.path, signed))
                if self.path == "/":
                    self._send(200, b'<html><body><a href="/shelf/">Shelf</a></body></html>',
                               [("Set-Cookie", "member=1; Path=/")])
                elif self.path == "/shelf/":
                    self._send(308, b"", [("Location", "/shelf")])
                elif self.path == "/shelf" and signed:
                    self._send(200, b"<html><body><p>Your shelf: 3 books</p></body></html>")
                elif self.path == "/shelf":
                    self._send(302, b"", [("Location", "/login")])
                else:
                    self._send(404, b"<html><body>no</body></html>")

            def _send(self, status, body, headers=()):
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_redirect_s_next_hop_in_the_check_is_answered_from_the_archive(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    site = Site()
    try:
        r = cli("record", "crawl", "http://shelf.test/", "--resolve", f"shelf.test=127.0.0.1:{site.server.server_port}",
                "--archive", tmp_path / "a.wfz", "--depth", "1", timeout=300)
    finally:
        site.close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(complete)" in r.stdout + r.stderr, r.stdout + r.stderr
    # the site saw /shelf once, with the cookie: the crawl's own visit, not the check's
    assert [h for h in site.hits if h[0].startswith("/shelf")] == [("/shelf/", True), ("/shelf", True)], site.hits
    with Archive.open(tmp_path / "a.wfz") as arc:
        got = sorted((ex.url, ex.status) for ex in arc.exchanges() if ex.url.startswith("http://shelf.test/shelf"))
    assert got == [("http://shelf.test/shelf", 200), ("http://shelf.test/shelf/", 308)], got
