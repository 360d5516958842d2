"""Replay provenance in the browser backend counts each request once, as the replay answered it.

Chromium refuses a module script answered 404 (by the site, recorded so, or by the replay's miss)
and reports the request failed after its response. That failure was counted as a second answer, a
miss: a request the replay missed was two misses, and a 404 the replay served exactly as the site
gave it (a VitePress build whose server had not seen the new chunks yet) made the episode
replay-compromised."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

T0 = "2024-03-01T12:00:00Z"
HOST = "http://docs.test"
PAGE = b"""<!doctype html><html><head><title>Docs</title>
<script type="module" src="/assets/app.old.js"></script>
<script type="module">import('/assets/chunks/box.js').catch(() => {});</script>
</head><body><h1>Docs</h1><p>The default lease_seconds is 300.</p></body></html>"""


def test_a_refused_answer_is_not_a_second_miss(tmp_path):
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_provenance_refused")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=PAGE, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        # the site's own 404 for a script it no longer had (recorded as it was given)
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/assets/app.old.js", status=404, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/plain")], payload=b"Not Found"))
    env = WebEnv(EnvConfig(tmp_path / "a.wfz", backend="browser"))
    try:
        env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
        env.step("send_msg_to_user('300')")
        traj = env.trajectory()
    finally:
        env.close()
    start = traj["replay"]["start"]
    scripts = sorted((a["url"].rsplit("/", 1)[1], a["level"], a["status"]) for a in start["answers"]
                     if "/assets/" in a["url"])
    assert scripts == [("app.old.js", "exact", 404), ("box.js", "miss", 404)], scripts
    assert traj["replay"]["misses"] == 1, traj["replay"]
    assert traj["replay"]["requests"]["subresource"] == {"exact": 1, "miss": 1}, traj["replay"]


def test_an_answer_that_fails_for_the_replays_own_fault_is_a_miss(tmp_path):
    # a stored body that does not decode as its Content-Encoding says: the browser fails the request
    # after its (200) answer came; not a refusal the site's own answer would get too, so a miss
    page = (b"<!doctype html><html><head><title>Docs</title></head><body><h1>Docs</h1><p id=out></p><script>"
            b"fetch('/data.json').then(r => r.text()).then(t => { out.textContent = t; }, () => {});"
            b"</script></body></html>")
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_provenance_refused")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=page, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/data.json", status=200, captured_at=T0,
                                  resp_headers=[("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
                                  payload=b"not gzip at all"))
    env = WebEnv(EnvConfig(tmp_path / "a.wfz", backend="browser"))
    try:
        env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
        env.step("send_msg_to_user('x')")
        traj = env.trajectory()
    finally:
        env.close()
    data = [(a["level"], a["status"]) for a in traj["replay"]["start"]["answers"] if a["url"].endswith("/data.json")]
    assert ("miss", 0) in data, data
    assert traj["replay"]["misses"] >= 1 and traj["replay"]["compromised"] is True, traj["replay"]


def test_a_stream_the_page_stops_reading_is_answered_not_missed(tmp_path):
    # Gradio reads a prediction's server-sent events with fetch's body reader and aborts the fetch
    # once its message has come: Chromium then reports the request failed (net::ERR_ABORTED) after
    # the replay's 200. The replay answered it; the page cancelled it. Counted as a miss it made
    # the task an "incomplete capture", on some runs and not others (whether the abort came before
    # the body's end reached the browser). Here events keep coming after the one the page wants,
    # as a server's heartbeats do, so the page always cancels before the end.
    page = (b"<!doctype html><html><head><title>Queue</title></head><body><h1>Queue</h1><p id=out></p><script>"
            b"const ctrl = new AbortController();"
            b"fetch('/queue/data?session_hash=ab12', {signal: ctrl.signal, headers: {Accept: 'text/event-stream'}})"
            b".then(async (r) => { const reader = r.body.getReader(); const dec = new TextDecoder(); let text = '';"
            b"  for (;;) { const {value, done} = await reader.read(); if (done) break;"
            b"    text += dec.decode(value, {stream: true});"
            b"    const m = text.match(/data: (\\{.*process_completed.*\\})\\n\\n/);"
            b"    if (m) { out.textContent = JSON.parse(m[1]).output; ctrl.abort(); break; } }"
            b"}).catch(() => {});"
            b"</script></body></html>")
    events = b'data: {"msg":"process_completed","output":"Mars orbits at 1.52 AU."}\n\n' + b": heartbeat\n\n" * 400_000
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_provenance_refused")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=page, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/queue/data?session_hash=ab12", status=200,
                                  captured_at=T0, payload=events,
                                  resp_headers=[("Content-Type", "text/event-stream; charset=utf-8")]))
    env = WebEnv(EnvConfig(tmp_path / "a.wfz", backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
        env.step("send_msg_to_user('1.52 AU')")
        traj = env.trajectory()
    finally:
        env.close()
    assert "Mars orbits at 1.52 AU." in obs["axtree_text"], obs["axtree_text"]
    data = [(a["level"], a["status"]) for a in traj["replay"]["start"]["answers"] if "/queue/data" in a["url"]]
    assert data == [("exact", 200)], data
    assert traj["replay"]["misses"] == 0 and traj["replay"]["compromised"] is False, traj["replay"]


def test_a_subresource_asked_for_again_alike_counts_once(tmp_path):
    # Verdaccio: an avatar that failed at capture (a 502, recorded so) shown by two elements; whether
    # Chromium asks for it once or twice depends on whether the first request is still under way
    # when the second element comes (its memory cache joins them), so one run counted 2 subresource
    # answers where another counted 3, and `bundle run` called the runs different. Here the second
    # element comes after the first failed: always asked again. Counted once; the page's XHRs, which
    # its scripts ask for, stay counted as asked.
    page = (b"<!doctype html><html><head><title>Pkg</title></head><body><h1>leftpad</h1>"
            b"<img src='/avatar/1' onerror=\"if (!window.again) { window.again = 1; const i = new Image();"
            b" i.src = '/avatar/1'; i.onerror = () => document.querySelector('h1').append(' (asked again)');"
            b" document.body.append(i); }\"><script>"
            b"fetch('/data.json').then(() => fetch('/data.json'));</script></body></html>")
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_provenance_refused")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=page, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/avatar/1", status=502, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/plain")], payload=b""))
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/data.json", status=200, captured_at=T0,
                                  resp_headers=[("Content-Type", "application/json")], payload=b"{}"))
    env = WebEnv(EnvConfig(tmp_path / "a.wfz", backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
        assert "leftpad (asked again)" in obs["axtree_text"]  # (the second element's request failed too)
        env.step("send_msg_to_user('leftpad')")
        traj = env.trajectory()
    finally:
        env.close()
    start = traj["replay"]["start"]
    assert [(a["url"], a["status"]) for a in start["answers"] if "/avatar/" in a["url"]] == [(HOST + "/avatar/1", 502)]
    assert start["requests"]["subresource"] == {"exact": 1}, start["requests"]
    assert start["requests"]["xhr"] == {"exact": 2}, start["requests"]


def test_a_placeholder_the_browser_refuses_is_answered_not_missed(tmp_path):
    # Node-RED's editor asks catalogue.nodered.org with jQuery's cache-busting `_=` (a cross-origin
    # XHR). Recorded offline, the archive holds the recording proxy's 502 for it (the site never
    # answered); that 502 has no CORS header, so the browser refuses it on replay as it did live and
    # reports no response at all. It was counted a miss (status 0): the episode replay-compromised,
    # and `tasks validate` called the task an incomplete capture, though nothing can be recorded.
    page = (b"<!doctype html><html><head><title>Editor</title></head><body><h1>Flows</h1><script>"
            b"fetch('https://catalogue.test/catalogue.json?_=' + Date.now()).catch(() => {});"
            b"</script></body></html>")
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_provenance_refused")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=page, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        arc.add_exchange(Exchange(session_id=sid, url="https://catalogue.test/catalogue.json?_=1709294400123",
                                  status=502, reason="Bad Gateway", resp_headers=[], payload=b"", captured_at=T0,
                                  extra={"error": "[Errno -2] Name or service not known"}))
    env = WebEnv(EnvConfig(tmp_path / "a.wfz", backend="browser"))
    try:
        env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
        env.step("send_msg_to_user('x')")
        traj = env.trajectory()
    finally:
        env.close()
    got = [(a["level"], a["status"]) for a in traj["replay"]["start"]["answers"] if "catalogue" in a["url"]]
    assert got == [("canonical", 502)], traj["replay"]["start"]["answers"]
    assert traj["replay"]["misses"] == 0 and traj["replay"]["compromised"] is False, traj["replay"]
