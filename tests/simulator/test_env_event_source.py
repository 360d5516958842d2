"""A page listening with ``EventSource``, replayed in the agent environment's browser backend: what
it shows depends on the archive and the episode's virtual time, never on how much real time went
by between steps (an agent's thinking).

Chromium's own ``EventSource`` connected again 3 s of real time after the replay ended an answer,
and the page got the events once more: an event stream the recording left open (a feed, a
heartbeat) showed each event twice to an agent that thought for 3 s, once to a quick one, and the
trajectory called every answer exact. The replay's runtime now keeps such a stream open, and
reconnects a stream the site ended after its ``retry`` on the virtual clock."""

from __future__ import annotations

import time

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

T0 = "2024-03-01T12:00:00Z"
HOST = "http://feed.test"
PAGE = b"""<!doctype html><html><head><title>Feed</title></head><body><h1>Feed</h1><ul id=out></ul>
<p id=state>listening</p><script>
const es = new EventSource(FEED);
es.onmessage = (e) => { const li = document.createElement('li'); li.textContent = e.data + ' #' + e.lastEventId; out.append(li); };
es.onerror = () => { state.textContent = 'lost the feed (state ' + es.readyState + ')'; };
</script></body></html>"""
TASK = {"id": "t", "start_url": HOST + "/", "instruction": "read the feed"}
THINK_S = 3.5  # real time between steps: past Chromium's 3 s reconnection delay


API = "http://api.feed.test"  # another origin, answering with CORS headers


def _archive(path, streams: list[tuple[bytes, bool]], feed: str = HOST + "/events"):
    page = PAGE.replace(b"FEED", repr(feed).encode())
    cors = [("Access-Control-Allow-Origin", HOST)] if feed.startswith(API) else []
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_event_source")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=page, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        for body, kept_open in streams:
            arc.add_exchange(Exchange(session_id=sid, url=feed, status=200, captured_at=T0, payload=body,
                                      resp_headers=[("Content-Type", "text/event-stream"), *cors],
                                      extra={"open_stream": True} if kept_open else {}))
    return path


def _feed(obs) -> list[str]:
    return [line.split("StaticText ", 1)[1].strip("'") for line in obs["axtree_text"].splitlines()
            if "StaticText" in line]


@pytest.mark.parametrize("feed", [HOST + "/events", API + "/events"], ids=["same-origin", "cross-origin"])
def test_an_event_stream_left_open_stays_open_however_long_the_agent_thinks(tmp_path, feed):
    path = _archive(tmp_path / "a.wfz", [(b"id: 1\ndata: rain at noon\n\nid: 2\ndata: wind from the west\n\n", True)],
                    feed)
    env = WebEnv(EnvConfig(path, backend="browser"))
    try:
        first, _ = env.reset(options={"task": TASK})
        time.sleep(THINK_S)
        later, *_ = env.step("noop(5000)")
        traj = env.trajectory()
    finally:
        env.close()
    shown = ["rain at noon #1", "wind from the west #2", "listening"]
    assert _feed(first) == shown
    assert _feed(later) == shown  # each event once, and no error: the site kept the stream open
    asked = [a["url"] for a in traj["replay"]["start"]["answers"]]
    asked += [a["url"] for s in traj["steps"] for a in (s.get("replay") or {}).get("answers", [])]
    assert asked.count(feed) == 1, asked
    assert traj["replay"]["misses"] == 0 and traj["replay"]["compromised"] is False


def test_a_stream_the_site_ended_reconnects_on_the_virtual_clock(tmp_path):
    # The site ended the stream, saying to reconnect after 5 s; the recording holds the
    # reconnection's answer. (Each settle runs 1 s of the page's time besides what noop asks.)
    path = _archive(tmp_path / "a.wfz", [(b"retry: 5000\nid: 1\ndata: rain at noon\n\n", False),
                                         (b"id: 2\ndata: wind from the west\n\n", False)])
    env = WebEnv(EnvConfig(path, backend="browser"))
    try:
        first, _ = env.reset(options={"task": TASK})
        time.sleep(THINK_S)
        soon, *_ = env.step("noop(500)")  # 2.5 s of the page's time in all: not yet
        after, *_ = env.step("noop(2000)")  # 5.5 s: connected again
    finally:
        env.close()
    lost = ["rain at noon #1", "lost the feed (state 0)"]
    assert _feed(first) == lost
    assert _feed(soon) == lost
    assert _feed(after) == ["rain at noon #1", "wind from the west #2", "lost the feed (state 0)"]
