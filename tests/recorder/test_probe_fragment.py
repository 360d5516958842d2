"""A start URL with a fragment (a hash-routed application's page, ``http://app.test/#/experiments``):
the fragment is the browser's, never sent to the server. The reachability check of ``record crawl``
and ``record session`` sent it in the request target, and a server that does not drop it itself
(MLflow 3's) answered 404: the crawl stopped before it began, "the site answered 404 Not Found"."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = b"<!doctype html><html><head><title>Runs</title></head><body><h1>Experiments</h1></body></html>"


class _Strict(BaseHTTPRequestHandler):
    targets: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.targets.append(self.path)
        ok = "#" not in self.path  # (a fragment in a request target: no such resource here)
        body = PAGE if ok else b"not found"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def strict_site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Strict)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_start_url_with_a_fragment_is_asked_for_without_it(tmp_path, monkeypatch, cli, strict_site):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    _Strict.targets.clear()
    r = cli("record", "crawl", "http://spa.test/#/experiments", "--resolve", f"spa.test=127.0.0.1:{strict_site}",
            "--archive", tmp_path / "spa.wfz", "--depth", "0", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _Strict.targets and not any("#" in t for t in _Strict.targets), _Strict.targets
