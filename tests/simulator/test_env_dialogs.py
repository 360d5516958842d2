"""JavaScript dialogs in the agent environment's browser backend: a ``confirm`` is accepted and a
``prompt`` answered with the text it offers, as a person going on with the task would, and each
dialog is recorded on the step that opened it (``dialogs``).

Playwright dismissed every dialog the environment did not handle, so a ``confirm`` returned false:
a delete or a bulk action behind one (Flask-Admin asks for each) never reached its server, and a
task recorded through it could not validate in the browser backend, while the text backend (no
scripts) went on as if accepted."""

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
HOST = "http://items.test"
PAGE = b"""<!doctype html><html><head><title>Items</title></head><body><h1>Items</h1>
<form method="post" action="/delete"><input type="hidden" name="id" value="7">
<button onclick="return confirm('Delete item 7?')">Delete item 7</button></form>
<button id=rename onclick="document.getElementById('name').textContent = 'Name: ' + prompt('New name?', 'Lamp')">
Rename</button><p id=name>Name: none</p>
<button onclick="alert('Saved nothing.'); document.getElementById('name').textContent += ' (alerted)'">Alert</button>
</body></html>"""
DONE = b"""<!doctype html><html><head><title>Items</title></head><body><p>Deleted item 7.</p></body></html>"""
HTML = [("Content-Type", "text/html; charset=utf-8")]


def _archive(path):
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_dialogs")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=PAGE, captured_at=T0,
                                  resp_headers=HTML))
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/delete", method="POST", status=200, payload=DONE,
                                  captured_at=T0, req_body=b"id=7", resp_headers=HTML,
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")]))
    return path


def _bid(obs, role, name):
    return next(e["bid"] for e in obs["elements"] if e["role"] == role and e.get("name") == name)


def test_dialogs_are_accepted_and_recorded_on_their_step(tmp_path):
    env = WebEnv(EnvConfig(_archive(tmp_path / "items.wfz"), backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "rename, then delete"}})
        obs, *_ = env.step(f"click('{_bid(obs, 'button', 'Rename')}')")
        assert "Name: Lamp" in obs["axtree_text"], obs["axtree_text"]
        obs, *_ = env.step(f"click('{_bid(obs, 'button', 'Alert')}')")
        assert "Name: Lamp (alerted)" in obs["axtree_text"], obs["axtree_text"]
        obs, *_ = env.step(f"click('{_bid(obs, 'button', 'Delete item 7')}')")
        assert "Deleted item 7." in obs["axtree_text"] and obs["last_action_error"] in (None, ""), obs["axtree_text"]
        steps = env.recorder.steps
    finally:
        env.close()
    assert [s.get("dialogs") for s in steps] == [
        [{"type": "prompt", "message": "New name?", "answer": "Lamp"}],
        [{"type": "alert", "message": "Saved nothing.", "answer": True}],
        [{"type": "confirm", "message": "Delete item 7?", "answer": True}]], steps
    assert steps[2]["url_after"] == HOST + "/delete"
