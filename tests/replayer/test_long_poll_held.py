"""A long poll (Syncthing's `GET /rest/events?since=N`, which its server holds until something
happens) has one ask in flight when a recorded session ends: its headers came, its answer never
did. The recorder keeps that in `unfinished/<session>.json`; the replay holds such a request as
the site did: asked once more than answered (or never answered at all), it gets no answer. Before,
the replay answered the last capture again at once, and a page that polls again at once spun
(~1,000 XHRs a step, their count up to the machine's speed: runs and bundle re-runs differed), or
got a 404 and showed Syncthing's "Connection Error". Here the agent environment's runtime never
delivers the held answer (fetch and XHR); `replay check`, whose browser runs its own timers, gets
the request held open by the replay server."""

from __future__ import annotations

import json

import pytest
from cli_runner import run_cli

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.archives.store import UNFINISHED_PREFIX
from webfreeze.replayer.replay import HELD_HEADER, HELD_WHY, Replay
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

SITE = "http://lp.test"
XHR = [("Sec-Fetch-Dest", "empty")]  # (a script's request: only those are held, never a document)
PAGE = """<!DOCTYPE html><html><head><title>Events</title></head><body><p id="f">fetch: 0</p><p id="x">xhr: 0</p><script>
let f = 0, x = 0;
(async () => { for (;;) { const r = await fetch('/events?since=3'); await r.text();
  document.getElementById('f').textContent = 'fetch: ' + (++f); } })();
function poll() { const q = new XMLHttpRequest(); q.open('GET', '/disk?since=7');
  q.onload = () => { document.getElementById('x').textContent = 'xhr: ' + (++x); poll(); }; q.send(); }
poll();
</script></body></html>"""


def _archive(path, unfinished: bool = True):
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_long_poll_held")
        for rel, ctype, body, t in (("/", "text/html; charset=utf-8", PAGE.encode(), 0),
                                    ("/events?since=3", "application/json", b"[]", 1),
                                    ("/disk?since=7", "application/json", b"[]", 2)):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at=f"2026-01-01T00:00:0{t}Z", status=200, reason="OK",
                                      session_id=sid, resp_headers=[("Content-Type", ctype)], payload=body))
        arc.add_page(session_id=sid, url=SITE + "/", captured_at="2026-01-01T00:00:00.500Z", title="Events",
                     dom=b"<html><body><p>fetch: 1</p><p>xhr: 1</p></body></html>")
        if unfinished:
            arc.put_document(f"{UNFINISHED_PREFIX}{sid}.json", {"version": 1, "requests": [
                f"GET {SITE}/disk?since=7", f"GET {SITE}/events?since=3", f"GET {SITE}/events?since=9"]})
    return path


def test_the_replay_holds_what_the_recording_never_got_an_answer_to(tmp_path):
    with Replay(_archive(tmp_path / "held.wfz")) as replay:
        replay.answers = []
        heads = [replay.answer("GET", SITE + rel, XHR, b"")[0].decode("latin-1")
                 for rel in ("/events?since=3", "/events?since=3", "/events?since=9")]
        assert [f"{HELD_HEADER}: 1" in h for h in heads] == [False, True, True], heads
        assert [(a.level, a.why) for a in replay.answers] == [("exact", None), ("exact", HELD_WHY), ("exact", HELD_WHY)]
        # a document is never held (an empty page would stand for one the site never finished): as before
        doc = [("Sec-Fetch-Dest", "document")]
        heads = [replay.answer("GET", SITE + "/events?since=3", doc, b"")[0].decode("latin-1") for _ in range(2)]
        assert not any(HELD_HEADER in h for h in heads), heads
        assert HELD_HEADER not in replay.answer("GET", SITE + "/events?since=9", doc, b"")[0].decode("latin-1")
    with Replay(_archive(tmp_path / "plain.wfz", unfinished=False)) as replay:  # (not held: as before)
        heads = [replay.answer("GET", SITE + "/events?since=3", XHR, b"")[0].decode("latin-1") for _ in range(2)]
        assert not any(HELD_HEADER in h for h in heads)


def _episode(path) -> tuple[str, dict]:
    from webfreeze.simulator.env import EnvConfig, WebEnv

    env = WebEnv(EnvConfig(path, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "e", "start_url": SITE + "/", "instruction": "read"}})
        obs, *_ = env.step("noop(1000)")
        return obs["axtree_text"], env.trajectory()
    finally:
        env.close()


def test_an_episode_on_a_long_polling_page_is_the_same_on_every_run(tmp_path):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    path = _archive(tmp_path / "held.wfz")
    text, trajectory = _episode(path)
    again_text, again = _episode(path)
    # each poll answered once as recorded, then held: the page waits, as it did on the site
    assert "fetch: 1" in text and "xhr: 1" in text, text
    start = trajectory["replay"]["start"]
    assert start["requests"]["xhr"] == {"exact": 4}, start["requests"]
    assert sorted(a["url"] for a in start["answers"] if a.get("why") == HELD_WHY) == [
        f"{SITE}/disk?since=7", f"{SITE}/events?since=3"]
    assert trajectory["replay"]["compromised"] is False
    assert trajectory["steps"][0]["replay"]["requests"] == {}, trajectory["steps"][0]["replay"]
    assert again_text == text
    for t in (trajectory, again):
        t.pop("timing", None)
        for s in t["steps"]:
            s.pop("timing", None)
    assert json.dumps(again["replay"], sort_keys=True) == json.dumps(trajectory["replay"], sort_keys=True)


def test_replay_check_gets_the_request_held_open(tmp_path):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    path = _archive(tmp_path / "held.wfz")
    r = run_cli("replay", "check", path, "--report", tmp_path / "check", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "asked one request again and again" not in r.stderr, r.stderr
    (page,) = json.loads((tmp_path / "check" / "report.json").read_text())["pages"]
    assert page["misses"] == [] and "asked_again" not in page, page
    # each poll answered once, then held open: the page waits, and the check's settle does not
    # wait for what the site held (its headers came: an event stream's rule)
    replayed = (tmp_path / "check" / page["dom"]).read_text()
    assert '<p id="f">fetch: 1</p>' in replayed and '<p id="x">xhr: 1</p>' in replayed, replayed[-300:]


@pytest.mark.slow
def test_a_session_keeps_the_poll_its_site_was_still_holding(tmp_path, monkeypatch):
    """Recorded for real: a server that answers a page's first poll at once and holds the next one
    (its headers sent, its answer not yet) when the session ends. The session says so, keeps it in
    ``unfinished/<session>.json``, and the replay of the session holds that poll too."""
    import http.server
    import threading

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    page = PAGE.replace("poll();\n</script>", "</script>").encode()
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/":
                body, ctype = page, "text/html; charset=utf-8"
            else:
                asked.append(self.path)
                body, ctype = b"[]", "application/json"
                if len(asked) > 1:  # (the next poll: held, its headers sent, until the client goes)
                    self.send_response(200)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                    self.rfile.read(1)  # (returns once the client closes)
                    return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = tmp_path / "poll.py"
    script.write_text("def run(page):\n    page.wait_for_function(\"document.getElementById('f').textContent === 'fetch: 1'\")\n"
                      "    page.wait_for_timeout(300)\n")
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    try:
        r = run_cli("record", "session", SITE + "/", "--archive", tmp_path / "lp.wfz", "--trajectory",
                    tmp_path / "poll.json", "--script", script, "--resolve", f"lp.test=127.0.0.1:{server.server_port}",
                    timeout=300)
    finally:
        server.shutdown()
    assert r.returncode == 0, r.stderr
    assert "a long poll the site was holding: a replay holds it too" in r.stderr, r.stderr
    from webfreeze.archives import Archive

    sid = json.loads((tmp_path / "poll.json").read_text())["archive_session"]
    with Archive.open(tmp_path / "lp.wfz") as arc:
        docs = {d.name: d.body() for d in arc.documents(prefix=UNFINISHED_PREFIX)}
    assert docs == {f"{UNFINISHED_PREFIX}{sid}.json": {"version": 1, "requests": [f"GET {SITE}/events?since=3"]}}
    with Replay(tmp_path / "lp.wfz") as replay:
        heads = [replay.answer("GET", SITE + "/events?since=3", XHR, b"")[0] for _ in range(2)]
    assert [HELD_HEADER.encode() in h for h in heads] == [False, True]
