"""A WebSocket a worker opens, in the agent environment's browser backend. Playwright routes no
worker's socket (its ``route_web_socket`` serves the page's own): Chromium sends it to the replay
server, through its proxy, as a plain ``CONNECT`` tunnel (``ws://``). The server answers it from the
archive's recording by the rule of replayer/websocket.py and tells the backend (one answer in the
step's provenance, or a miss); it marks each batch for the worker's runtime, so the settle waits
for the conversation as for a page's socket: a rally of round trips is whole in the first
observation, on every reset. The archive is written as the recorder writes one."""

from __future__ import annotations

import time

import pytest
from ws_recording import rally_recording

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://worker-sockets.test"
ROUNDS = 6
HANDSHAKE_DELAY_S = 1.0
ROUTE_DELAY_S = 0.5
PAGE = """<!DOCTYPE html><html><head><title>Worker socket</title></head><body><p id="out">no ball yet</p><script>
const show = (e) => { document.getElementById('out').textContent = e.data; };
if (location.pathname === '/shared') {
  const w = new SharedWorker('/s.js' + location.search);
  w.port.onmessage = show;
} else {
  const w = new Worker('/w.js' + location.search);
  w.onmessage = show;
}
</script></body></html>"""
# the worker plays a rally with the server: it sends back each number below ROUNDS, the server
# answers with the next; every message is shown on the page (``say``: a dedicated worker's
# postMessage, a shared worker's ports')
RALLY = """const ws = new WebSocket('ws://worker-sockets.test/feed' + location.search);
ws.onmessage = (e) => { say('worker rally at ' + e.data); if (Number(e.data) < %d) ws.send(e.data); };
ws.onerror = () => say('worker socket failed');""" % ROUNDS
WORKER = "const say = (t) => postMessage(t);\n" + RALLY
SHARED = ("const ports = [];\nonconnect = (e) => { ports.push(e.ports[0]); };\n"
          "const say = (t) => ports.forEach((p) => p.postMessage(t));\n" + RALLY)
OPENED = 1767225600.5  # (2026-01-01T00:00:00.5Z: after the page's capture)
# a page and its worker open a socket each to one URL: the page's first (recorded so), the worker's second
BOTH = """<!DOCTYPE html><html><head><title>Both</title></head><body><p id="page">page waits</p><p id="worker">worker waits</p>
<script>
const ws = new WebSocket('ws://worker-sockets.test/news');
ws.onmessage = (e) => { document.getElementById('page').textContent = 'page got ' + e.data; };
const w = new Worker('/both.js');
w.onmessage = (e) => { document.getElementById('worker').textContent = 'worker got ' + e.data; };
</script></body></html>"""
BOTH_WORKER = """const ws = new WebSocket('ws://worker-sockets.test/news');
ws.onmessage = (e) => postMessage(e.data);"""




@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("worker-sockets") / "worker-sockets.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_worker_sockets")
        for rel, ctype, body in (("/", "text/html; charset=utf-8", PAGE), ("/?room=2", "text/html; charset=utf-8", PAGE),
                                 ("/shared", "text/html; charset=utf-8", PAGE),
                                 ("/shared?room=2", "text/html; charset=utf-8", PAGE),
                                 ("/w.js", "text/javascript", WORKER), ("/w.js?room=2", "text/javascript", WORKER),
                                 ("/s.js", "text/javascript", SHARED), ("/s.js?room=2", "text/javascript", SHARED),
                                 ("/both", "text/html; charset=utf-8", BOTH), ("/both.js", "text/javascript", BOTH_WORKER)):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
        # (the handshake's own exchange, a 101, is beside it in a real recording; the replay reads the document)
        arc.put_document(f"websocket/{sid}/feed.json", rally_recording("ws://worker-sockets.test/feed", ROUNDS, OPENED))
        for n, said in enumerate(("the first connection", "the second connection")):
            arc.put_document(f"websocket/{sid}/news{n}.json", {
                "version": 1, "url": "ws://worker-sockets.test/news", "opened": OPENED + n, "closed_by_client": None,
                "close_code": None, "messages": [{"from_client": False, "type": "text", "content": said,
                                                  "time": OPENED + n + 0.1}]})
    return path


def _sockets(trajectory) -> list[tuple]:
    answers = trajectory["replay"]["start"]["answers"]
    return [(a["kind"], a["method"], a["level"], a["status"], a["url"]) for a in answers if a["url"].startswith("ws:")]


@pytest.mark.parametrize("page", ["/", "/shared"], ids=["dedicated", "shared"])
def test_a_worker_s_socket_is_answered_from_its_recording_and_settled(archive, page):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    told = env.server.on_socket

    def slowly(url, level, why):
        # a loaded machine: the server's answer to the handshake comes late (it is told before
        # it answers), later than the settle's quiet period; the settle still waits for the rally
        time.sleep(HANDSHAKE_DELAY_S)
        told(url, level, why)

    env.server.on_socket = slowly
    try:
        runs = []
        for _ in range(2):
            obs, _ = env.reset(options={"task": {"id": "ws", "start_url": SITE + page, "instruction": "read it"}})
            runs.append((obs["axtree_text"], env.trajectory()))
        obs, _ = env.reset(options={"task": {"id": "ws2", "start_url": SITE + page + "?room=2", "instruction": "read it"}})
        missed = (obs["axtree_text"], env.trajectory(), list(env.server.misses))
    finally:
        env.close()
    for text, trajectory in runs:
        # the whole rally, in the first observation: the settle waited for every round trip
        assert f"worker rally at {ROUNDS}" in text, text
        assert _sockets(trajectory) == [("xhr", "GET", "exact", 101, "ws://worker-sockets.test/feed")]
        assert trajectory["replay"]["misses"] == 0 and trajectory["replay"]["compromised"] is False
    assert runs[0][0] == runs[1][0]
    # a socket the archive holds no recording of (another room): a miss, in the provenance and the server's
    text, trajectory, server_misses = missed
    assert "worker socket failed" in text, text
    assert _sockets(trajectory) == [("xhr", "GET", "miss", 0, "ws://worker-sockets.test/feed?room=2")]
    assert trajectory["replay"]["compromised"] is True
    # why, in the trajectory as in the server's list
    why = ("a WebSocket the archive holds no recording of at these query parameters (recorded with others: "
           "ws://worker-sockets.test/feed; parameters that may differ, an id drawn from the clock or at random, go "
           "in replay_rules' ignorable_params)")
    assert [f.get("why") for f in trajectory["replay"]["start"]["flagged"] if f["url"].startswith("ws:")] == [why]
    assert [(m["url"], m["why"]) for m in server_misses] == [("ws://worker-sockets.test/feed?room=2", why)]


@pytest.mark.parametrize("late", [False, True], ids=["as-it-comes", "page-route-late"])
def test_a_page_and_its_worker_count_their_sockets_to_a_url_together(archive, late, monkeypatch):
    """The k-th socket to a URL gets the k-th recording, whoever opens it: the page's is served in
    the browser, the worker's by the replay server, from one count, in the order they were made.
    ``late``: Playwright's route hands the page's socket over only after the worker's has reached
    the replay server (a loaded machine's order of arrival: the loop thread busy); the page made
    its own first, so it still gets the first recording."""
    from webfreeze.simulator.replay_route import SocketRoutes

    if late:
        handle = SocketRoutes.handle

        def slow_handle(self, ws, **kw):
            time.sleep(ROUTE_DELAY_S)  # (on the loop thread: nothing else of Playwright's goes on meanwhile)
            return handle(self, ws, **kw)

        monkeypatch.setattr(SocketRoutes, "handle", slow_handle)
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "both", "start_url": SITE + "/both", "instruction": "read it"}})
        trajectory = env.trajectory()
    finally:
        env.close()
    text = obs["axtree_text"]
    assert "page got the first connection" in text and "worker got the second connection" in text, text
    assert [s[:4] for s in _sockets(trajectory)] == [("xhr", "GET", "exact", 101)] * 2
    assert trajectory["replay"]["compromised"] is False
