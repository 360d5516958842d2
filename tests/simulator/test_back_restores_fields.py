"""Back to a form the agent filled in, then left: Chromium gives the page's fields back (a text,
a text area, a tick, a choice; not a password, nor a field whose ``autocomplete`` is ``off``), and
the text backend now does the same. It used to show the form empty (Roundup: a second submit after
``go_back()`` then sent another body than the browser's and missed)."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

FORM = b"""<!doctype html><title>Form</title><form action="/done" method="post">
<label>Name <input name="name"></label><label>Secret <input name="pw" type="password"></label>
<label>Code <input name="code" autocomplete="off"></label><label>Note <textarea name="note"></textarea></label>
<label><input type="checkbox" name="agree"> Agree</label>
<select name="size" aria-label="Size"><option>S</option><option>M</option></select>
<button type="submit">Send</button></form><a href="/other">Other</a>"""


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("back") / "form.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_back_restores_fields")
        for url, body in (("/", FORM), ("/other", b"<!doctype html><title>Other</title><p>other</p>")):
            arc.add_exchange(Exchange(url="http://f.test" + url, captured_at="2026-01-01T00:00:00Z", status=200,
                                      resp_headers=[("Content-Type", "text/html")], payload=body, session_id=sid))
    return path


def _filled_then_back(archive, backend: str) -> tuple[str, str]:
    env = WebEnv(EnvConfig(archive, backend=backend))
    try:
        obs, _ = env.reset(options={"task": {"id": "b", "start_url": "http://f.test/", "instruction": "fill"}})
        empty = obs["axtree_text"]

        def bid(role, name):
            return next(e["bid"] for e in obs["elements"] if e["role"] == role and e["name"] == name)
        for action in (f"fill('{bid('textbox', 'Name')}', 'Ada')", f"fill('{bid('textbox', 'Secret')}', 'pw123')",
                       f"fill('{bid('textbox', 'Code')}', 'C9')", f"fill('{bid('textbox', 'Note')}', 'hello')",
                       f"click('{bid('checkbox', 'Agree')}')", f"select_option('{bid('combobox', 'Size')}', 'M')",
                       f"click('{bid('link', 'Other')}')", "go_back()"):
            obs, *_ = env.step(action)
            assert obs["last_action_error"] == "", (action, obs["last_action_error"])
        back = obs["axtree_text"]
        obs, *_ = env.step("go_forward()")
        obs, *_ = env.step("go_back()")
        assert obs["axtree_text"] == back  # (given back again after a forward and a back)
        return empty, back
    finally:
        env.close()


def test_the_text_backend_gives_back_what_chromium_gives_back(archive):
    empty, back = _filled_then_back(archive, "text")
    assert "value='Ada'" in back and "value='hello'" in back and "checked='true'" in back and "value='M'" in back
    assert "textbox 'Secret'\n" in back and "textbox 'Code'\n" in back, back  # (a password, autocomplete=off)
    assert back != empty
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    assert _filled_then_back(archive, "browser")[1] == back
