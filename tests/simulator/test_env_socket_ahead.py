"""A site that acts by HTTP and answers on its WebSocket (marimo: a widget's change is a POST, the
kernel's output comes on the socket, and the page sends nothing there). The conversation rule
waits for the page's socket messages only, so as the socket opened it used to send every push the
session recorded, the result of the person's later POST among them: the agent read the result
before acting. Now a push recorded after that POST waits until the page makes it (the replay
answers it as recorded), then comes at the end of the step's settle: the start shows the page
before the action, the step after it, the same bytes on every run. When the page sends a socket
message while a push waits, the push goes first (the conversation's order holds): the socket is
then ahead of the page, the step says so (the socket reported once more, ``fuzzy``, with why
WEBSOCKET_AHEAD) and the episode is replay-compromised."""

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
  body: 'name=Ada'})">Greet Ada</button><button onclick="ws.send('hi')">Say hi</button><ul id="out"></ul><script>
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
        for rel in ("/", "/?early", "/?chat"):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at=_iso(T0), status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                      payload=PAGE.encode(), session_id=sid))
        arc.add_exchange(Exchange(url=SITE + "/api/set", method="POST", captured_at=_iso(T0 + 10), status=200,
                                  reason="OK", resp_headers=[("Content-Type", "text/plain")], payload=b"ok",
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                  req_body=b"name=Ada", session_id=sid))
        # the person's session: the greeting the POST at T0 + 10 brought, pushed at T0 + 11
        # (?early: a socket whose pushes all came before it; ?chat: then the person said hi on it)
        for query, times in (("", (T0 + 2, T0 + 11)), ("?early", (T0 + 2, T0 + 3)), ("?chat", (T0 + 2, T0 + 11))):
            said = [(False, times[0], "rendered"), (False, times[1], "Hello, Ada!")]
            if query == "?chat":
                said += [(True, T0 + 12, "hi"), (False, T0 + 13, "hi back")]
            arc.put_document(f"websocket/{sid}/ws{query.strip('?')}.json", {
                "version": 1, "url": "ws://pushes.test/ws" + query, "opened": T0 + 1, "closed_by_client": None,
                "close_code": None, "messages": [{"from_client": c, "type": "text", "time": t, "content": text}
                                                 for c, t, text in said]})
    return path


def _ahead(replay_part) -> list:
    return [a["url"] for a in replay_part["answers"] if a.get("why") == WEBSOCKET_AHEAD]


def _button(obs, name: str) -> str:
    return next(e["bid"] for e in obs["elements"] if e["role"] == "button" and e["name"] == name)


def _greet(env, query: str = "") -> tuple[str, str, dict]:
    """The start's text, the text after clicking Greet Ada, and the trajectory."""
    obs, _ = env.reset(options={"task": {"id": "g", "start_url": SITE + "/" + query, "instruction": "greet Ada"}})
    start = obs["axtree_text"]
    obs, *_ = env.step(f"click('{_button(obs, 'Greet Ada')}')")
    return start, obs["axtree_text"], env.trajectory()


def test_pushes_that_answer_an_action_wait_for_the_page_to_take_it(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        start, after, trajectory = _greet(env)
        again = _greet(env)
        obs, _ = env.reset(options={"task": {"id": "e", "start_url": SITE + "/?early", "instruction": "read"}})
        early = obs["axtree_text"]
    finally:
        env.close()
    # the start is the page before the action: the greeting waits for the POST it followed
    assert "rendered" in start and "Hello, Ada!" not in start, start
    # the click made that POST (answered as recorded): the greeting came at the step's settle
    assert "Hello, Ada!" in after, after
    (step,) = trajectory["steps"]
    assert [a["level"] for a in step["replay"]["answers"] if a["method"] == "POST"] == ["exact"]
    assert _ahead(trajectory["replay"]["start"]) == [] and _ahead(step["replay"]) == []
    assert trajectory["replay"]["compromised"] is False
    assert (start, after) == again[:2]  # (the same bytes on another run)
    # pushes that all came before the action: all there at the start
    assert "rendered" in early and "Hello, Ada!" in early, early


def test_a_socket_the_page_left_gets_nothing_when_its_action_comes_later(archive):
    """The page's greeting waits on `/`'s socket; the agent goes to `/?early` (that socket closes)
    and greets Ada there: the POST lets the old socket's push through, to a socket that is gone,
    and the settle waited for a mark that never came (2.1 s, the step's settle said stopped short)."""
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        env.reset(options={"task": {"id": "g", "start_url": SITE + "/", "instruction": "greet Ada"}})
        obs, *_ = env.step(f"goto('{SITE}/?early')")
        obs, *_ = env.step(f"click('{_button(obs, 'Greet Ada')}')")
        step = env.trajectory()["steps"][-1]
    finally:
        env.close()
    assert "settle" not in step["replay"], step["replay"]
    assert [a["level"] for a in step["replay"]["answers"] if a["method"] == "POST"] == ["exact"]



def test_a_page_loaded_again_gets_its_socket_again(archive):
    """A page loaded again in one episode (a goto to the URL it is on, or back to one seen before)
    opens its socket again and shows what the recording pushes. Playwright's stand-in for the
    page's socket drew its id from the page's seeded generator: the second visit's socket got the
    first one's id, and Playwright closed it before it opened (the list stayed empty)."""
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "e", "start_url": SITE + "/?early", "instruction": "read"}})
        texts = [obs["axtree_text"]]
        for url in (SITE + "/?early", SITE + "/", SITE + "/?early"):
            obs, *_ = env.step(f"goto('{url}')")
            assert obs["last_action_error"] == "", obs["last_action_error"]
            texts.append(obs["axtree_text"])
    finally:
        env.close()
    for i in (0, 1, 3):
        assert "rendered" in texts[i] and "Hello, Ada!" in texts[i], (i, texts[i])
    assert "rendered" in texts[2] and "Hello, Ada!" not in texts[2], texts[2]

def test_a_page_that_speaks_while_a_push_waits_gets_it_first_and_is_said_ahead(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "c", "start_url": SITE + "/?chat", "instruction": "say hi"}})
        start = obs["axtree_text"]
        obs, *_ = env.step(f"click('{_button(obs, 'Say hi')}')")
        trajectory = env.trajectory()
    finally:
        env.close()
    assert "Hello, Ada!" not in start, start
    # the page said hi without greeting Ada: the recording's order holds, the greeting first
    text = obs["axtree_text"]
    assert text.index("Hello, Ada!") < text.index("hi back"), text
    (step,) = trajectory["steps"]
    assert _ahead(trajectory["replay"]["start"]) == [] and _ahead(step["replay"]) == ["ws://pushes.test/ws?chat"]
    assert ("fuzzy", 101) in [(a["level"], a["status"]) for a in step["replay"]["answers"]
                              if a.get("why") == WEBSOCKET_AHEAD]
    assert trajectory["replay"]["compromised"] is True


def test_tasks_validate_warns_of_a_task_whose_replay_is_compromised(archive, tmp_path, cli):
    """Both tasks are reachable; `tasks validate` warns that the runs of the one whose page speaks
    while a push waits are replay-compromised, naming it (and in its JSON), and not the other's."""
    import json

    from session_task import write_suite

    def task(tid: str, query: str, button: str, css: str, answer: str):
        url = SITE + "/" + query
        reference = {"version": 1, "kind": "reference_trajectory", "start_url": url,
                     "viewport": {"width": 1920, "height": 1080}, "recorded_by": "script", "steps": [
                         {"action": "navigate", "cause": "goto", "url": url, "step": 0, "time": 1.0},
                         {"action": "click", "target": {"role": "button", "name": button, "css": css,
                                                        "tag": "button", "text": button},
                          "value": None, "url": url, "step": 1, "time": 2.0},
                         {"action": "answer", "target": None, "value": {"text": answer}, "url": url,
                          "step": 2, "time": 3.0}]}
        return ({"id": tid, "category": "forms", "instruction": f"Click {button}. What does the page say last?",
                 "start_url": url, "snapshot_time": _iso(T0), "ground_truth": {"answer": {"exact": answer}}},
                reference)

    suite = write_suite(tmp_path / "suite", archive, "pushes",
                        [task("greet", "", "Greet Ada", "button:nth-of-type(1)", "Hello, Ada!"),
                         task("chat", "?chat", "Say hi", "button:nth-of-type(2)", "hi back")])
    r = cli("tasks", "validate", suite, "--backend", "browser", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("warning: replay: 1 of 2 episodes replay-compromised (0 fuzzy main document, 1 fuzzy XHR, 0 miss): "
            "chat; every run of it will be too") in r.stderr, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", timeout=300)
    assert json.loads(r.stdout)["compromised"] == ["chat"]
