"""Issue 48: what a page waits for decides when a settle ends, not the machine's speed; where a
safety net of wall-clock time is hit anyway, the trajectory says so. A page whose frame load never
ends (the frame is removed as it starts) is waited for up to the runtime's network bound, then
counted in the step's provenance (``replay.settle.stalled``) and the episode's (``stalled``); a
page that reloads itself on a timer forever stops at the settle's count of rounds
(``unsettled: ["rounds"]``); an ordinary page's trajectory carries neither."""

from __future__ import annotations

import pytest

import webfreeze.replayer.determinism as determinism
import webfreeze.simulator.browser_backend as browser_backend
from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://stalls.test"
PAGES = {
    # a timer (so the pump's watch sees it) adds a frame and removes it at once: its load never ends
    "/held": "<!DOCTYPE html><title>Held</title><p id=out>waiting</p><script>"
             "setTimeout(() => { const f = document.createElement('iframe'); f.src = '/frame';"
             " document.body.appendChild(f); f.remove();"
             " setTimeout(() => { document.getElementById('out').textContent = 'went on'; }, 10); }, 0);</script>",
    "/frame": "<!DOCTYPE html><title>Frame</title><p>frame</p>",
    # a page that reloads itself on every settle's timers, forever
    "/again": "<!DOCTYPE html><title>Again</title><p>again</p><script>setTimeout(() => location.reload(), 50);</script>",
    "/plain": "<!DOCTYPE html><title>Plain</title><p>plain</p><script>setTimeout(() => {}, 20);</script>",
    "/still": "<!DOCTYPE html><title>Still</title><p>still</p>",  # no timer: one round of settle
    # TiddlyWiki's shape: a save whose answer's body the page never reads (the replay's miss
    # answer), and a status read the same way from an answer the site sent with no-store
    "/unread": "<!DOCTYPE html><title>Unread</title><p id=out>editing</p><script>"
               "setTimeout(() => fetch('/recipes/default/tiddlers/Carrots', {method: 'PUT',"
               " body: JSON.stringify({title: 'Carrots', modified: String(Date.now())})})"
               ".then(r => { document.getElementById('out').textContent = 'saved ' + r.status; }), 0);</script>",
    "/unread-stored": "<!DOCTYPE html><title>Stored</title><p id=out>asking</p><script>"
                      "setTimeout(() => fetch('/status').then(r => {"
                      " document.getElementById('out').textContent = 'status ' + r.status; }), 0);</script>",
}
# (answered with the site's own Cache-Control: no-store)
NO_STORE = {"/status": '{"username": "", "anonymous": true}'}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("stalls") / "stalls.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_stalls")
        for rel, body in PAGES.items():
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                      payload=body.encode(), session_id=sid))
        for rel, body in NO_STORE.items():
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", "application/json"),
                                                    ("Cache-Control", "no-store")],
                                      payload=body.encode(), session_id=sid))
    return path


@pytest.fixture(scope="module")
def env(archive):
    # short bounds so the test does not wait out the real ones (60 s, 50 rounds): the rule is the same
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(determinism, "STALL_MS", 200)
        mp.setattr(determinism, "NETWORK_STALL_MS", 1000)
        mp.setattr(browser_backend, "SETTLE_ROUNDS", 4)
        environment = WebEnv(EnvConfig(archive, backend="browser"))
        try:
            yield environment
        finally:
            environment.close()


def _start(env, path: str) -> tuple[dict, dict]:
    obs, _ = env.reset(options={"task": {"id": path.strip("/"), "start_url": SITE + path, "instruction": "look"}})
    return obs, env.trajectory()["replay"]


def test_a_load_that_never_ends_is_given_up_and_recorded(env):
    obs, replay = _start(env, "/held")
    assert replay["start"]["settle"] == {"unsettled": [], "stalled": 1}, replay["start"]
    assert replay["stalled"] == 1 and "unsettled" not in replay, replay
    assert "went on" in obs["axtree_text"]  # the pump went on once it stopped waiting


def test_a_page_that_never_settles_stops_at_the_count_and_says_so(env):
    _, replay = _start(env, "/again")
    assert replay["start"]["settle"]["unsettled"] == ["rounds"], replay["start"]
    assert replay["unsettled"] == 1, replay


def test_an_ordinary_page_carries_no_settle_note(env):
    obs, replay = _start(env, "/plain")
    assert "settle" not in replay["start"] and "stalled" not in replay and "unsettled" not in replay, replay
    assert "plain" in obs["axtree_text"]


def test_a_settle_cut_by_its_time_bound_while_the_network_is_busy_says_so(env, monkeypatch):
    """The settle's wall-clock safety net, reached while it waited for the network to go quiet,
    was not noted: the step took the whole bound (300 s) and its provenance said it had settled.
    A network that never goes quiet cannot be made for real here (the replay answers at once, and
    an answer whose body the page never reads no longer counts, next test), so the page's activity
    is made to report a request in flight for ever, and the bound is made short."""
    from webfreeze.simulator.browser import PageActivity

    monkeypatch.setattr(browser_backend, "SETTLE_TIMEOUT_S", 2)
    monkeypatch.setattr(PageActivity, "__bool__", lambda self: True)
    _, replay = _start(env, "/still")
    assert replay["start"]["settle"]["unsettled"] == ["time"], replay["start"]
    assert replay["unsettled"] == 1, replay


@pytest.mark.parametrize("path, shown", [("/unread", "saved 404"), ("/unread-stored", "status 200")])
def test_an_answer_whose_body_the_page_never_reads_does_not_hold_the_settle(env, monkeypatch, path, shown):
    """Chromium never finishes a fetch answered with ``Cache-Control: no-store`` (the replay's miss
    answer says it, so do many APIs) while the page leaves its body unread, as TiddlyWiki does with
    the answer to a save: the settle waited for that request until its time bound, 300 s a step.
    A fetch is the network's until its answer comes; its body is the page's to read, and the
    runtime holds the pump for a body the page does read. The bound is made short, so the old rule
    shows as a settle cut by it."""
    monkeypatch.setattr(browser_backend, "SETTLE_TIMEOUT_S", 3)
    obs, replay = _start(env, path)
    assert "settle" not in replay["start"] and "unsettled" not in replay, replay
    assert shown in obs["axtree_text"]
