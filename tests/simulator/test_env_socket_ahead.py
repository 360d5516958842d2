"""A site that acts by HTTP and answers on its WebSocket (marimo: a widget's change is a POST, the
kernel's output comes on the socket, and the page sends nothing there): the conversation rule waits
for the page's socket messages only, so as the socket opens it sends every push the session
recorded, the result of the person's later POST among them. The agent would read that result
before acting: the step says so (the socket reported once more, ``fuzzy``, with why
WEBSOCKET_AHEAD) and the episode is replay-compromised. Once the agent makes that POST the socket
is no longer ahead, and nothing more is said; a recording whose pushes all came before the
action is not ahead at all."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.websocket import WEBSOCKET_AHEAD
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://pushes.test"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z
PAGE = """<!DOCTYPE html><html><head><title>Greeter</title></head><body>
<button onclick="fetch('/api/set', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
  body: 'name=Ada'})">Greet Ada</button><ul id="out"></ul><script>
const ws = new WebSocket('ws://pushes.test/ws' + location.search);
ws.onmessage = (e) => { const li = document.createElement('li'); li.textContent = e.data;
  document.getElementById('out').append(li); };
</script></body></html>"""


def _iso(t: float) -> str:
    return "2026-01-01T00:00:%06.3fZ" % (t - T0)


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("ahead") / "pushes.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_socket_ahead")
        for rel in ("/", "/?early"):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at=_iso(T0), status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                      payload=PAGE.encode(), session_id=sid))
        arc.add_exchange(Exchange(url=SITE + "/api/set", method="POST", captured_at=_iso(T0 + 10), status=200,
                                  reason="OK", resp_headers=[("Content-Type", "text/plain")], payload=b"ok",
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                  req_body=b"name=Ada", session_id=sid))
        # the person's session: the greeting the POST at T0 + 10 brought, pushed at T0 + 11
        # (?early: a socket whose pushes all came before it)
        for query, times in (("", (T0 + 2, T0 + 11)), ("?early", (T0 + 2, T0 + 3))):
            arc.put_document(f"websocket/{sid}/ws{query.strip('?')}.json", {
                "version": 1, "url": "ws://pushes.test/ws" + query, "opened": T0 + 1, "closed_by_client": None,
                "close_code": None, "messages": [
                    {"from_client": False, "type": "text", "time": times[0], "content": "rendered"},
                    {"from_client": False, "type": "text", "time": times[1], "content": "Hello, Ada!"}]})
    return path


def _ahead(replay_part) -> list:
    return [a["url"] for a in replay_part["answers"] if a.get("why") == WEBSOCKET_AHEAD]


def test_pushes_that_answer_an_action_not_taken_are_said_and_compromise_the_episode(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "g", "start_url": SITE + "/", "instruction": "greet Ada"}})
        start_text = obs["axtree_text"]
        button = next(e["bid"] for e in obs["elements"] if e["role"] == "button")
        obs, *_ = env.step(f"click('{button}')")
        after = env.trajectory()
        obs, _ = env.reset(options={"task": {"id": "e", "start_url": SITE + "/?early", "instruction": "read"}})
        early = env.trajectory()
    finally:
        env.close()
    # the known limit: the greeting is there before the click; the trajectory now says so
    assert "Hello, Ada!" in start_text, start_text
    assert _ahead(after["replay"]["start"]) == ["ws://pushes.test/ws"]
    assert ("fuzzy", 101) in [(a["level"], a["status"]) for a in after["replay"]["start"]["answers"]
                              if a.get("why") == WEBSOCKET_AHEAD]
    assert after["replay"]["compromised"] is True
    # the click made the POST the push answered: said once, not again
    (step,) = after["steps"]
    assert _ahead(step["replay"]) == [] and [a["level"] for a in step["replay"]["answers"]
                                          if a["method"] == "POST"] == ["exact"]
    # pushes that all came before the action: nothing ahead, nothing compromised
    assert _ahead(early["replay"]["start"]) == [] and early["replay"]["compromised"] is False


def test_tasks_validate_warns_that_such_a_task_replays_compromised(archive, tmp_path, cli):
    """The task is reachable (the reference clicks, the greeting shows), and `tasks validate` says
    so, with a warning that its runs are replay-compromised, naming it (and in its JSON)."""
    import json

    from session_task import write_suite

    reference = {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/",
                 "viewport": {"width": 1920, "height": 1080}, "recorded_by": "script", "steps": [
                     {"action": "navigate", "cause": "goto", "url": SITE + "/", "step": 0, "time": 1.0},
                     {"action": "click", "target": {"role": "button", "name": "Greet Ada", "css": "button",
                                                    "tag": "button", "text": "Greet Ada"},
                      "value": None, "url": SITE + "/", "step": 1, "time": 2.0},
                     {"action": "answer", "target": None, "value": {"text": "Hello, Ada!"}, "url": SITE + "/",
                      "step": 2, "time": 3.0}]}
    task = {"id": "greet", "category": "forms", "instruction": "Greet Ada. What does the page say?",
            "start_url": SITE + "/", "snapshot_time": _iso(T0), "ground_truth": {"answer": {"exact": "Hello, Ada!"}}}
    suite = write_suite(tmp_path / "suite", archive, "pushes", [(task, reference)])
    r = cli("tasks", "validate", suite, "--backend", "browser", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("warning: replay: 1 of 1 episodes replay-compromised (0 fuzzy main document, 1 fuzzy XHR, 0 miss): "
            "greet; every run of it will be too") in r.stderr, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", timeout=300)
    assert json.loads(r.stdout)["compromised"] == ["greet"]
