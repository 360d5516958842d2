"""A page whose content arrives over a WebSocket (a Shiny app, a dashboard): no replay serves the
conversation, and every part of webfreeze that loads the page through a replay says so. The crawl's
check keeps the socket off the live site and marks the page incomplete; ``replay check`` counts it
among the misses; the agent environment's browser backend counts it as a miss of the episode
(replay-compromised); ``tasks validate`` names it. The site is a real HTTP server on loopback whose
page fills a paragraph from the first message of a WebSocket (the handshake of RFC 6455 by hand)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cli_runner import run_cli

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = b"""<!doctype html><html><head><title>Socket page</title></head><body><h1>Socket page</h1>
<p id="out">Waiting for the server</p><script>
const ws = new WebSocket("ws://" + location.host + "/ws");
ws.onmessage = (e) => { document.getElementById("out").textContent = e.data; };
</script></body></html>"""
MESSAGE = b"Answer from the socket"
HANDSHAKE_DELAY_S = 1.0
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class SocketSite:
    """``/``: the page; ``/ws``: a WebSocket that sends :data:`MESSAGE` and waits for the close.
    ``sockets`` counts the WebSockets opened (what reached the live site), ``pages`` the page's loads."""

    def __init__(self):
        self.sockets = 0
        self.pages = 0
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
                    site.sockets += 1
                    # a handshake slower than the crawl's quiet period (as through the recording
                    # proxy on a loaded machine): the capture still waits for what the socket sends
                    time.sleep(HANDSHAKE_DELAY_S)
                    key = self.headers["Sec-WebSocket-Key"] + GUID
                    self.send_response(101)
                    self.send_header("Upgrade", "websocket")
                    self.send_header("Connection", "Upgrade")
                    self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
                    self.end_headers()
                    self.wfile.write(bytes([0x81, len(MESSAGE)]) + MESSAGE)  # one text frame, unmasked
                    self.wfile.flush()
                    try:
                        self.connection.settimeout(30)
                        while self.connection.recv(1024):
                            pass
                    except OSError:
                        pass
                    self.close_connection = True
                    return
                found = self.path == "/"
                site.pages += found
                body = PAGE if found else b"not found"
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8" if found else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """The page crawled once: (the crawl's result, the archive, the site's URL, (WebSockets, page loads) the site saw)."""
    tmp = tmp_path_factory.mktemp("socket")
    site = SocketSite()
    archive = tmp / "socket.wfz"
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp / "home"))
    try:
        r = run_cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "0", env=env, timeout=300)
    finally:
        site.stop()
    return r, archive, site.url, (site.sockets, site.pages)


def test_the_crawl_check_keeps_the_socket_off_the_site_and_marks_the_page(crawled):
    r, archive, url, (sockets, pages) = crawled
    socket_url = url.replace("http:", "ws:") + "/ws"
    # the captures' own sockets only: one per live load of the page but the crawl's first probe
    # (no browser; a capture tried again on a loaded machine loads it again), none from the check,
    # which loads the page from the archive alone (before, it went past the replay, through the
    # recording proxy, to the live site)
    assert sockets == pages - 1 >= 1, (sockets, pages)
    assert r.returncode == 3, r.stdout + r.stderr  # incomplete
    assert "(complete)" not in r.stdout
    assert f"incomplete: {url}/ (missing: {socket_url} (a WebSocket: replay does not serve its conversation))" \
        in r.stdout, r.stdout
    # one line, and no --recheck offered: a live fetch cannot repair a WebSocket
    assert r.stderr.count("\n") == 1 and "WebSocket" in r.stderr and "--recheck cannot" in r.stderr, r.stderr
    with Archive.open(archive) as arc:
        (page,) = list(arc.pages())
        assert page.extra["complete"] is False
        assert "Answer from the socket" in page.payload().decode()  # the capture shows what the socket sent
        assert [d.name for d in arc.documents(prefix="websocket/")]  # its messages are kept


@pytest.mark.parametrize("mode", ["proxy", "direct"])
def test_replay_check_counts_the_socket_as_a_miss(crawled, tmp_path, mode):
    _, archive, url, _ = crawled
    r = run_cli("replay", "check", archive, "--report", tmp_path / "report", "--mode", mode,
                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr  # a page misses a request
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (page,) = report["pages"]
    assert [m for m in page["misses"] if m.startswith("ws:") and m.endswith("/ws")], page
    assert report["summary"]["pages_with_misses"] == 1
    assert page["text_similarity"] < 0.9  # the replay shows "Waiting for the server", not the answer
    # and the page is named as one that replays with other text (a miss may be what leads there)
    assert "warning: 1 page replays with other text than the capture" in r.stderr, r.stderr


def test_the_browser_backend_counts_the_socket_and_the_episode_is_compromised(crawled, tmp_path, monkeypatch):
    from webfreeze.simulator.env import EnvConfig, WebEnv

    _, archive, url, _ = crawled
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "socket", "start_url": f"{url}/", "instruction": "read it"}})
        assert "Waiting for the server" in obs["axtree_text"]  # what the page shows without its socket
        env.step("send_msg_to_user('Waiting for the server')")
        trajectory = env.trajectory()
    finally:
        env.close()
    start = trajectory["replay"]["start"]
    assert [(f["kind"], f["method"], f["level"]) for f in start["flagged"] if f["url"].startswith("ws:")] == \
        [("xhr", "GET", "miss")], start["flagged"]
    assert trajectory["replay"]["misses"] >= 1 and trajectory["replay"]["compromised"] is True
