"""Pages whose content arrives over a WebSocket (a Shiny app, a dashboard, a chat): the recorder keeps
each connection's conversation, and every in-process replay serves it from the archive, in the
browser (Playwright's ``route_web_socket``), by the rule of replayer/websocket.py: the server's
messages before the page's first, then, for each message of the page equal to the recorded one, the
server's answer; a page that says something else parts from the recording and the socket is a miss.
The crawl's check keeps the socket off the live site and finds the page complete; ``replay check``
finds no miss (both modes); the agent environment's browser backend serves it (the episode is not
compromised), twice alike; a page whose message differs is a miss. The site is a real HTTP server on
loopback speaking RFC 6455 by hand."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
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

INDEX = b"""<!doctype html><html><head><title>Socket page</title></head><body><h1>Socket page</h1>
<p id="out">Waiting for the server</p>
<p><a href="/chat">chat</a> <a href="/two">two</a> <a href="/rally">rally</a> <a href="/bye">bye</a></p><script>
const ws = new WebSocket("ws://" + location.host + "/ws");
ws.onmessage = (e) => { document.getElementById("out").textContent = e.data; };
</script></body></html>"""
# a request/answer conversation (like Shiny's init): the page speaks first, the server answers; what
# the page says holds its query string, so a replay of it under another query says something else
CHAT = b"""<!doctype html><html><head><title>Chat page</title></head><body><h1>Chat page</h1>
<p id="out">Waiting for the answer</p><script>
const ws = new WebSocket("ws://" + location.host + "/ws-chat");
ws.onopen = () => ws.send("hello" + location.search);
ws.onmessage = (e) => { document.getElementById("out").textContent = e.data; };
</script></body></html>"""
# two sockets to one URL, the second opened once the first has spoken: each gets its own recording
TWO = b"""<!doctype html><html><head><title>Two sockets</title></head><body><h1>Two sockets</h1>
<p id="a">first pending</p><p id="b">second pending</p><script>
const url = "ws://" + location.host + "/ws-count";
const a = new WebSocket(url);
a.onmessage = (e) => {
  document.getElementById("a").textContent = "A got " + e.data;
  const b = new WebSocket(url);
  b.onmessage = (f) => { document.getElementById("b").textContent = "B got " + f.data; };
};
</script></body></html>"""
# a rally: the server sends 0, the page sends back each number it gets below ROUNDS, the server
# answers with the next: ROUNDS round trips, each waited for by the settle before it observes
RALLY = b"""<!doctype html><html><head><title>Rally</title></head><body><h1>Rally</h1>
<p id="out">no ball yet</p><script>
const ws = new WebSocket("ws://" + location.host + "/ws-rally");
ws.onmessage = (e) => {
  document.getElementById("out").textContent = "rally at " + e.data;
  if (Number(e.data) < 10) ws.send(e.data);
};
</script></body></html>"""
ROUNDS = 10
# a socket the site refuses (no upgrade: 404): nothing recorded, so a miss in every replay
REFUSED = b"""<!doctype html><html><head><title>Refused</title></head><body><h1>Refused</h1><script>
const ws = new WebSocket("ws://" + location.host + "/ws-none");
</script></body></html>"""
# a server that says goodbye and closes: the replay closes after the last message, with its code
BYE = b"""<!doctype html><html><head><title>Bye</title></head><body><h1>Bye</h1><p id="out">open</p><script>
const ws = new WebSocket("ws://" + location.host + "/ws-bye");
let got = "";
ws.onmessage = (e) => { got = e.data; };
ws.onclose = (e) => { document.getElementById("out").textContent = got + ", closed " + e.code; };
</script></body></html>"""
# a socket that asks for subprotocols (as Streamlit's: "streamlit" and a token); the server picks the
# first, and a browser fails a handshake whose answer picks none. Not linked from "/": crawled apart
PROTO = b"""<!doctype html><html><head><title>Protocol</title></head><body><h1>Protocol</h1>
<p id="out">no answer</p><script>
const ws = new WebSocket("ws://" + location.host + "/ws-chat", ["chat", "token-1"]);
ws.onopen = () => ws.send("hello over " + ws.protocol);
ws.onmessage = (e) => { document.getElementById("out").textContent = e.data; };
</script></body></html>"""
# a page that names its message with ids it makes up (Bokeh's msgid: uuid4 from Math.random), after
# opening its socket, and shows the answer only when it names them back: its replay sends the ids
# the recording holds only if it draws, live and replayed, the same numbers
IDS = b"""<!doctype html><html><head><title>Ids</title></head><body><h1>Ids</h1>
<p id="out">no answer</p><script>
const ws = new WebSocket("ws://" + location.host + "/ws-chat");
const id = Math.random().toString(36).slice(2) + "-" + crypto.randomUUID();
ws.onopen = () => ws.send("pull " + id);
ws.onmessage = (e) => {
  document.getElementById("out").textContent = e.data === "answer to pull " + id ? "answered " + id : "not mine";
};
</script></body></html>"""
PAGES = {"/": INDEX, "/chat": CHAT, "/two": TWO, "/rally": RALLY, "/refused": REFUSED, "/bye": BYE,
         "/proto": PROTO, "/ids": IDS}
MESSAGE = b"Answer from the socket"
HANDSHAKE_DELAY_S = 1.0
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _exact(conn, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


def read_frame(conn) -> tuple[int, bytes]:
    """One frame from a client (masked, RFC 6455): (opcode, payload)."""
    head = _exact(conn, 2)
    n = head[1] & 0x7F
    if n == 126:
        n = struct.unpack(">H", _exact(conn, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", _exact(conn, 8))[0]
    mask = _exact(conn, 4) if head[1] & 0x80 else b"\0\0\0\0"
    data = bytes(b ^ mask[i % 4] for i, b in enumerate(_exact(conn, n)))
    return head[0] & 0x0F, data


def text_frame(text: bytes) -> bytes:
    assert len(text) < 126
    return bytes([0x81, len(text)]) + text  # one text frame, unmasked


class SocketSite:
    """``/``, ``/chat``, ``/two``, ``/rally``: the pages; ``/ws`` sends :data:`MESSAGE` (after a slow
    handshake); ``/ws-chat`` answers each text message with ``answer to <it>``; ``/ws-count`` sends
    ``connection <n>`` (its n-th connection); ``/ws-rally`` sends 0 and answers a number with the next;
    ``/ws-bye`` sends ``bye`` and closes (code 4000).
    ``sockets`` counts the WebSockets opened (what reached
    the live site) by path, ``pages`` the pages' loads by path."""

    def __init__(self):
        self.sockets: dict[str, int] = {}
        self.pages: dict[str, int] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                if path.startswith("/ws") and path != "/ws-none" and self.headers.get("Upgrade", "").lower() == "websocket":
                    n = site.sockets[path] = site.sockets.get(path, 0) + 1
                    if path == "/ws":
                        # a handshake slower than the crawl's quiet period (as through the recording
                        # proxy on a loaded machine): the capture still waits for what the socket sends
                        time.sleep(HANDSHAKE_DELAY_S)
                    key = self.headers["Sec-WebSocket-Key"] + GUID
                    self.send_response(101)
                    self.send_header("Upgrade", "websocket")
                    self.send_header("Connection", "Upgrade")
                    self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
                    if self.headers.get("Sec-WebSocket-Protocol"):  # (the first the page offers)
                        self.send_header("Sec-WebSocket-Protocol", self.headers["Sec-WebSocket-Protocol"].split(",")[0])
                    self.end_headers()
                    if path == "/ws":
                        self.wfile.write(text_frame(MESSAGE))
                    elif path == "/ws-count":
                        self.wfile.write(text_frame(f"connection {n}".encode()))
                    elif path == "/ws-rally":
                        self.wfile.write(text_frame(b"0"))
                    elif path == "/ws-bye":
                        self.wfile.write(text_frame(b"bye") + bytes([0x88, 2]) + (4000).to_bytes(2, "big"))
                    self.wfile.flush()
                    try:
                        self.connection.settimeout(30)
                        while True:
                            opcode, data = read_frame(self.connection)
                            if opcode == 8:
                                break
                            if opcode == 1 and path == "/ws-chat":
                                self.wfile.write(text_frame(b"answer to " + data))
                                self.wfile.flush()
                            elif opcode == 1 and path == "/ws-rally":
                                self.wfile.write(text_frame(str(int(data) + 1).encode()))
                                self.wfile.flush()
                    except OSError:
                        pass
                    self.close_connection = True
                    return
                body = PAGES.get(path)
                if body is not None:
                    site.pages[path] = site.pages.get(path, 0) + 1
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8" if body else "text/plain")
                body = body or b"not found"
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


def crawl_one(tmp_path, path: str):
    """``path`` of a fresh :class:`SocketSite` crawled alone (depth 0) into ``tmp_path``: (the
    crawl's result, the archive, the site's URL)."""
    site = SocketSite()
    archive = tmp_path / (path.strip("/") + ".wfz")
    try:
        r = run_cli("record", "crawl", f"{site.url}{path}", "--archive", archive, "--depth", "0",
                    env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    finally:
        site.stop()
    return r, archive, site.url


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """The site crawled once: (the crawl's result, the archive, the site's URL, the WebSockets and the
    page loads the site saw, by path)."""
    tmp = tmp_path_factory.mktemp("socket")
    site = SocketSite()
    archive = tmp / "socket.wfz"
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp / "home"))
    try:
        r = run_cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "1", env=env, timeout=300)
    finally:
        site.stop()
    return r, archive, site.url, (dict(site.sockets), dict(site.pages))


def test_the_crawl_records_the_conversations_and_its_check_replays_them(crawled):
    r, archive, url, (sockets, pages) = crawled
    # the captures' own sockets only: one per live load of a page but the crawl's first probe of
    # "/" (no browser; a capture tried again on a loaded machine loads it again), none from the
    # check, which loads the page from the archive alone (it keeps the socket off the live site)
    assert sockets.get("/ws") == pages["/"] - 1 >= 1, (sockets, pages)
    assert sockets.get("/ws-chat") == pages["/chat"] >= 1, (sockets, pages)
    assert sockets.get("/ws-count") == 2 * pages["/two"] >= 2, (sockets, pages)
    assert sockets.get("/ws-rally") == pages["/rally"] >= 1, (sockets, pages)
    assert sockets.get("/ws-bye") == pages["/bye"] >= 1, (sockets, pages)
    assert r.returncode == 0, r.stdout + r.stderr  # complete: the check replayed every socket
    assert "(complete)" in r.stdout and "incomplete" not in r.stdout, r.stdout
    with Archive.open(archive) as arc:
        records = {p.url: p for p in arc.pages()}
        assert all(p.extra["complete"] is True for p in records.values()), {u: p.extra for u, p in records.items()}
        assert "Answer from the socket" in records[f"{url}/"].payload().decode()  # the capture shows what it sent
        docs = [d.body() for d in arc.documents(prefix="websocket/")]
    chat = [d for d in docs if d["url"].endswith("/ws-chat")]
    assert [(m["from_client"], m["content"]) for m in chat[0]["messages"]] == \
        [(True, "hello"), (False, "answer to hello")]
    assert all(isinstance(d["opened"], float) for d in docs)


def test_a_socket_without_a_recording_is_missing_and_the_page_incomplete(tmp_path):
    r, archive, url = crawl_one(tmp_path, "/refused")
    assert r.returncode == 3, r.stdout + r.stderr  # incomplete
    socket_url = url.replace("http:", "ws:") + "/ws-none"
    assert f"incomplete: {url}/refused (missing: {socket_url} (a WebSocket the archive holds no recording of))" \
        in r.stdout, r.stdout
    # one line, and no --recheck offered: a live fetch cannot repair a WebSocket
    assert r.stderr.count("\n") == 1 and "WebSocket" in r.stderr and "--recheck cannot" in r.stderr, r.stderr
    # archive info says so too, long after the crawl's own words are gone
    info = run_cli("archive", "info", archive, env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")))
    assert info.returncode == 0, info.stderr
    assert "incomplete  1 page (their crawl's check missed requests: their replays will miss them too)" in info.stdout
    why = f"{socket_url} (a WebSocket the archive holds no recording of)"
    assert f"{url}/refused (missing: {why})" in info.stdout, info.stdout
    info = run_cli("archive", "info", archive, "--json", env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")))
    assert json.loads(info.stdout)["incomplete_pages"] == [{"url": f"{url}/refused", "missing": [why]}]
    # replay check lists the socket among the page's misses, and its misses.jsonl says why
    r = run_cli("replay", "check", archive, "--report", tmp_path / "check",
                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = [json.loads(line) for line in (tmp_path / "check" / "misses.jsonl").read_text().splitlines()]
    assert [(m["url"], m.get("why")) for m in rows] == \
        [(socket_url, "a WebSocket the archive holds no recording of")], rows
    # in direct mode too, under the URL it stands for (not the replay's address the page's own
    # location put in it, prefixed by the shim once more)
    r = run_cli("replay", "check", archive, "--report", tmp_path / "direct", "--mode", "direct",
                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads((tmp_path / "direct" / "report.json").read_text())
    assert report["pages"][0]["misses"] == [socket_url], report["pages"][0]


@pytest.mark.parametrize("mode", ["proxy", "direct"])
def test_replay_check_serves_the_sockets(crawled, tmp_path, mode):
    _, archive, url, _ = crawled
    r = run_cli("replay", "check", archive, "--report", tmp_path / "report", "--mode", mode,
                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    pages = {p["url"]: p for p in report["pages"]}
    assert report["summary"]["pages_with_misses"] == 0, [(p["url"], p["misses"]) for p in report["pages"]]
    assert r.returncode == 0, r.stdout + r.stderr
    for page in (f"{url}/", f"{url}/chat", f"{url}/two", f"{url}/bye"):
        assert pages[page]["text_similarity"] == 1.0, pages[page]  # the page drawn whole, as captured
    dom = (tmp_path / "report" / pages[f"{url}/two"]["dom"]).read_text()
    assert "A got connection 1" in dom and "B got connection 2" in dom
    assert f"rally at {ROUNDS}" in (tmp_path / "report" / pages[f"{url}/rally"]["dom"]).read_text()
    assert "bye, closed 4000" in (tmp_path / "report" / pages[f"{url}/bye"]["dom"]).read_text()


def _episode(env, url: str):
    obs, _ = env.reset(options={"task": {"id": "socket", "start_url": url, "instruction": "read it"}})
    env.step("send_msg_to_user('read')")
    return obs, env.trajectory()


@pytest.fixture(scope="module")
def episodes(crawled, tmp_path_factory):
    """The browser backend's episodes on the socket pages, two runs of each of two environments:
    {(run, url): (first observation, trajectory)}."""
    from webfreeze.simulator.env import EnvConfig, WebEnv

    _, archive, url, _ = crawled
    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("WEBFREEZE_HOME")
    os.environ["WEBFREEZE_HOME"] = str(home)
    out = {}
    try:
        for run in (1, 2):
            env = WebEnv(EnvConfig(archive, backend="browser"))
            try:
                for page in (f"{url}/", f"{url}/chat", f"{url}/two", f"{url}/rally", f"{url}/bye",
                             f"{url}/chat?utm_source=mail"):
                    out[(run, page)] = _episode(env, page)
            finally:
                env.close()
    finally:
        if old is None:
            os.environ.pop("WEBFREEZE_HOME", None)
        else:
            os.environ["WEBFREEZE_HOME"] = old
    return url, out


def _sockets(trajectory) -> list[tuple]:
    answers = trajectory["replay"]["start"]["answers"]
    return [(a["kind"], a["method"], a["level"], a["status"]) for a in answers if a["url"].startswith("ws:")]


@pytest.mark.slow
def test_the_browser_backend_serves_the_socket_and_the_episode_is_whole(episodes):
    url, out = episodes
    obs, trajectory = out[(1, f"{url}/")]
    assert "Answer from the socket" in obs["axtree_text"] and "Waiting for the server" not in obs["axtree_text"]
    assert _sockets(trajectory) == [("xhr", "GET", "exact", 101)], trajectory["replay"]["start"]
    assert trajectory["replay"]["misses"] == 0 and trajectory["replay"]["compromised"] is False
    # a request/answer conversation: the page's message is the recorded one, the answer follows
    obs, trajectory = out[(1, f"{url}/chat")]
    assert "answer to hello" in obs["axtree_text"], obs["axtree_text"]
    assert trajectory["replay"]["compromised"] is False
    # two sockets to one URL: the first gets the first recorded connection, the second the second
    obs, trajectory = out[(1, f"{url}/two")]
    assert "A got connection 1" in obs["axtree_text"] and "B got connection 2" in obs["axtree_text"], obs["axtree_text"]
    assert _sockets(trajectory) == [("xhr", "GET", "exact", 101)] * 2
    assert trajectory["replay"]["compromised"] is False


@pytest.mark.slow
def test_a_page_that_says_something_else_parts_and_is_a_miss(episodes):
    url, out = episodes
    # the same document (utm_source is a tracker the canonical match drops), but the page sends
    # "hello?utm_source=mail", which the recording never heard: no answer, and a miss
    obs, trajectory = out[(1, f"{url}/chat?utm_source=mail")]
    assert "Waiting for the answer" in obs["axtree_text"] and "answer to" not in obs["axtree_text"]
    assert sorted(_sockets(trajectory)) == [("xhr", "GET", "exact", 101), ("xhr", "GET", "miss", 0)]
    flagged = trajectory["replay"]["start"]["flagged"]
    assert [(f["kind"], f["method"], f["level"]) for f in flagged if f["url"].startswith("ws:")] == \
        [("xhr", "GET", "miss")], flagged
    # and why: what the page said that the recording never heard
    [why] = [f["why"] for f in flagged if f["url"].startswith("ws:")]
    assert why.startswith("a WebSocket whose conversation parted from the recording: ") and "utm_source" in why, why
    assert trajectory["replay"]["misses"] == 1 and trajectory["replay"]["compromised"] is True


@pytest.mark.slow
def test_two_runs_observe_the_socket_pages_alike(episodes):
    url, out = episodes
    # (the settle waits for the replay's deliveries on a socket, counted by the page's runtime, as
    # for a load: the observation holds every answer, however slow the machine)
    for page, shown in ((f"{url}/", "Answer from the socket"), (f"{url}/chat", "answer to hello"),
                        (f"{url}/two", "B got connection 2"), (f"{url}/rally", f"rally at {ROUNDS}"),
                        (f"{url}/bye", "bye, closed 4000")):
        (obs1, t1), (obs2, t2) = out[(1, page)], out[(2, page)]
        assert shown in obs1["axtree_text"], obs1["axtree_text"]
        assert obs1["axtree_text"].encode() == obs2["axtree_text"].encode(), page
        assert json.dumps(t1["replay"], sort_keys=True) == json.dumps(t2["replay"], sort_keys=True)


def test_replay_serve_serves_the_sockets_in_direct_mode(crawled):
    """``replay serve``'s own server (direct mode: the page at ``/<timestamp>/<url>``, its socket
    rewritten by the shim to the server's own origin) answers the handshake and plays the
    recorded conversation; a page that says something else is a miss in its report."""
    from playwright.sync_api import sync_playwright

    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import launch_chromium

    _, archive, url, _ = crawled
    with Archive.open(archive) as arc:
        at = {p.url: p.captured_at for p in arc.pages()}
    server = ReplayServer(archive, mode="direct", port=0).start()
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw, shell=True)
            page = browser.new_page()
            for path, shown in (("/two", "B got connection 2"), ("/rally", f"rally at {ROUNDS}"),
                                ("/chat", "answer to hello")):
                ts = "".join(ch for ch in at[f"{url}{path}"] if ch.isdigit())[:14]
                page.goto(f"{server.url}/{ts}/{url}{path}")
                page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=shown, timeout=20_000)
            assert server.misses == []
            page.goto(f"{server.url}/{ts}/{url}/chat?utm_source=mail")  # says "hello?utm_source=mail"
            for _ in range(200):
                if server.misses:
                    break
                page.wait_for_timeout(50)
            assert [m["url"] for m in server.misses] == [url.replace("http:", "ws:") + "/ws-chat"]
            assert "answer to" not in page.inner_text("body")
            browser.close()
    finally:
        server.stop()


def test_replay_serve_serves_the_sockets_through_its_proxy(crawled):
    """``replay serve`` in proxy mode, as a person's Chromium uses it: Chromium tunnels every
    ``ws://`` socket with ``CONNECT host:port`` and speaks plain HTTP inside (measured; never an
    absolute-form request), which the server reads as ``http://host:port``'s and answers by the same
    rule; a page that says something else is a miss in its report, with why."""
    from playwright.sync_api import sync_playwright

    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import launch_chromium

    _, archive, url, _ = crawled
    server = ReplayServer(archive, mode="proxy", port=0).start()
    tunnels = []
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw, proxy=server.url, shell=True)
            page = browser.new_page()
            for path, shown in (("/", "Answer from the socket"), ("/two", "B got connection 2"),
                                ("/rally", f"rally at {ROUNDS}"), ("/bye", "bye, closed 4000"),
                                ("/chat", "answer to hello")):
                page.goto(f"{url}{path}")
                page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=shown, timeout=20_000)
            assert server.misses == [] and server.stats["hits"] >= 11, (server.misses, server.stats)
            page.goto(f"{url}/chat?utm_source=mail")  # says "hello?utm_source=mail"
            for _ in range(200):
                if server.misses:
                    break
                page.wait_for_timeout(50)
            tunnels = [m for m in server.misses if m["method"] == "CONNECT"]
            assert [(m["url"], m["why"]) for m in server.misses] == \
                [(url.replace("http:", "ws:") + "/ws-chat", "a WebSocket whose conversation parted from the "
                  "recording: the page sent 'hello?utm_source=mail', the recording 'hello'")]
            assert "answer to" not in page.inner_text("body")
            # the miss says why (the miss report's "why"): what the page said, what the recording did
            assert server.misses[0]["why"] == ("a WebSocket whose conversation parted from the recording: the page "
                                               "sent 'hello?utm_source=mail', the recording 'hello'"), server.misses
            browser.close()
    finally:
        server.stop()
    assert tunnels == []


@pytest.mark.parametrize("mode", ["direct", "proxy"])
def test_replay_serve_answers_the_recorded_subprotocol(tmp_path, mode):
    """A page whose socket asks for subprotocols (Streamlit's ``["streamlit", token]``) gets the one
    the recording's server chose in ``replay serve``'s handshake (both modes): without it the
    browser fails the socket, and the page stayed empty."""
    from playwright.sync_api import sync_playwright

    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import launch_chromium

    r, archive, url = crawl_one(tmp_path, "/proto")
    assert r.returncode == 0, r.stderr
    shown = "answer to hello over chat"
    with Archive.open(archive) as arc:
        at = "".join(ch for ch in next(iter(arc.pages())).captured_at if ch.isdigit())[:14]
    server = ReplayServer(archive, mode=mode, port=0).start()
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw, proxy=server.url if mode == "proxy" else None, bypass_internal=False,
                                      shell=True)
            page = browser.new_page()
            page.goto(f"{url}/proto" if mode == "proxy" else f"{server.url}/{at}/{url}/proto")
            page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=shown, timeout=20_000)
            assert server.misses == []
            browser.close()
    finally:
        server.stop()


def test_a_page_sending_ids_it_made_up_replays_as_recorded(tmp_path):
    """The recording browser's page draws the numbers its replay's page will (the replay's generator,
    seeded alike, goes in front of the live page's scripts), so the ids it sends over its socket are
    the recording's in every replay: the crawl's check finds the page complete, and the agent
    environment's page gets its answer, twice alike. The archive keeps the page as the site sent it."""
    from webfreeze.simulator.env import EnvConfig, WebEnv

    r, archive, url = crawl_one(tmp_path, "/ids")
    assert r.returncode == 0 and "(complete)" in r.stdout, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        page = next(ex for ex in arc.exchanges() if ex.url == f"{url}/ids")
        assert page.response.payload() == IDS  # as the site sent it: the generator went to the browser only
        record = next(iter(arc.pages()))
        assert b"function R(c)" not in record.dom()  # (the script took itself out of the capture's DOM)
        said = [m["content"] for d in arc.documents(prefix="websocket/") for m in d.body()["messages"]]
    assert said[0].startswith("pull ") and said[1] == "answer to " + said[0], said
    shown = []
    for _ in range(2):
        web = WebEnv(EnvConfig(archive, backend="browser"))
        try:
            obs, _ = web.reset(options={"task": {"id": "ids", "start_url": f"{url}/ids", "instruction": "read"}})
            shown.append((obs["axtree_text"], web.trajectory()["replay"]["compromised"]))
        finally:
            web.close()
    assert shown[0] == shown[1]
    text, compromised = shown[0]
    assert "answered " + said[0][len("pull "):] in text and compromised is False, text


@pytest.mark.parametrize("fmt", ["warc", "wacz"])
def test_an_export_says_it_leaves_the_conversations_out(crawled, tmp_path, fmt):
    """WARC has no record for a WebSocket's messages: the export keeps each handshake's 101 and says,
    on stderr, how many conversations it left out (it wrote them nowhere, silently, before)."""
    _, archive, _, _ = crawled
    with Archive.open(archive) as arc:
        held = sum(1 for _ in arc.documents(prefix="websocket/"))
    assert held >= 5
    r = run_cli("archive", "export", archive, "--format", fmt, "-o", tmp_path / f"out.{fmt}",
                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"note: {held} WebSocket conversation(s) left out (a WARC holds no WebSocket messages, only their "
        "handshakes): their pages will not replay from it; 'archive pack' keeps them")
