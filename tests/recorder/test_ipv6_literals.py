"""IPv6 literal URLs (``http://[::1]:PORT/x``) are recorded with their brackets, keyed with them,
and replayed: a crawl of a site on [::1] replays with no misses, in proxy and direct mode."""

from __future__ import annotations

import http.server
import socket
import threading
import urllib.request

import pytest

from webfreeze.archives import Archive
from webfreeze.archives.urlkey import surt_key, url_of
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path


def test_url_keys_and_spellings_keep_brackets():
    assert url_of("http", "::1", 8080, "/x") == "http://[::1]:8080/x"
    assert url_of("https", "2001:db8::1", 443, "/") == "https://[2001:db8::1]/"
    assert url_of("http", "site.test", 80, "/p?q") == "http://site.test/p?q"
    assert surt_key("http://[::1]:8080/x?b=1&a=2") == "[::1]:8080)/x?a=2&b=1"
    assert surt_key("http://[2001:DB8::1]/p") == "[2001:db8::1])/p"
    assert surt_key("http://[::1]:8080/x") != surt_key("http://[::1:8080]/x")
    assert surt_key("http://site.test/a") == "test,site)/a"  # (everything else as the surt package says)


class _Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/":
            body = b"<html><head><title>six</title></head><body><p>over IPv6</p><img src='/dot.gif'></body></html>"
            ctype = "text/html"
        elif self.path == "/dot.gif":
            body, ctype = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", "image/gif"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def six_site():
    try:
        server = _Server(("::1", 0), _Handler)
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback: {exc}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_crawl_over_ipv6_is_stored_with_brackets_and_replays(six_site, tmp_path, monkeypatch):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    from webfreeze.recorder.crawl import crawl
    from webfreeze.replayer.server import ReplayServer

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    archive = tmp_path / "six.wfz"
    base = f"http://[::1]:{six_site}"
    result = crawl(archive, base + "/", depth=0, max_pages=1)
    assert result.pages == 1
    with Archive.open(archive) as arc:
        urls = sorted(e.url for e in arc.exchanges())
        keys = {e.url: e.surt for e in arc.exchanges()}
        page = next(iter(arc.pages()))
    assert {base + "/", base + "/dot.gif"} <= set(urls) and all(u.startswith(base + "/") for u in urls), urls
    assert keys[base + "/"] == f"[::1]:{six_site})/"
    assert page.url == base + "/"
    with ReplayServer(archive, mode="direct", miss_report=None) as srv:
        with urllib.request.urlopen(f"{srv.url}/2id_/{base}/dot.gif", timeout=10) as r:
            assert r.read().startswith(b"GIF89a")
    with ReplayServer(archive, mode="proxy", miss_report=None, confdir=tmp_path / "home") as srv:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": srv.url}))
        with opener.open(base + "/", timeout=10) as r:
            assert b"over IPv6" in r.read()
        assert srv.stats["misses"] == 0
