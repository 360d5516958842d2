"""A page's script scrolling one of its own elements is no step of the person's: every Verdaccio 6
session began with a ``scroll`` step to (0, 0) "by page" that nobody made (its scroll event came
from an element; the window had not moved), logged as a window scroll. A scroll of the window
that the person made is still logged."""

from __future__ import annotations

import json

import pytest
from static_site import static_site

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# a list the page scrolls to its chosen item once loaded (an autocomplete, a log view); the link is
# in view after the person's scroll (a click on a link out of view scrolls the window to it first)
PAGE = b"""<!doctype html><html><head><title>Registry</title></head><body>
<div id="list" style="height: 60px; overflow: auto"><p>a</p><p>b</p><p>c</p><p>d</p><p>e</p><p>f</p></div>
<div style="height: 700px"></div><a href="/two">two</a><div style="height: 3000px"></div>
<script>addEventListener('load', () => { document.getElementById('list').scrollTop = 40; });</script>
</body></html>"""

SCRIPT = '''
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.wait_for_function("document.getElementById('list').scrollTop > 0")
    page.wait_for_timeout(400)  # (past the 150 ms a scroll rests before it is logged)
    page.mouse.wheel(0, 500)
    page.wait_for_function("window.scrollY > 0")
    page.wait_for_timeout(400)
    page.get_by_role("link", name="two").click()
    page.wait_for_url("**/two")
'''


@pytest.fixture
def site():
    with static_site({"*": PAGE}) as port:
        yield port


def test_an_element_the_page_scrolls_is_no_step(tmp_path, monkeypatch, cli, site):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    out = tmp_path / "t.json"
    r = cli("record", "session", "http://reg.test/", "--resolve", f"reg.test=127.0.0.1:{site}",
            "--archive", tmp_path / "a.wfz", "--trajectory", out, "--script", script, timeout=300)
    assert r.returncode == 0, r.stderr
    steps = json.loads(out.read_text())["steps"]
    scrolls = [s["value"] for s in steps if s["action"] == "scroll"]
    assert len(scrolls) == 1 and scrolls[0]["by"] == "user" and scrolls[0]["y"] > 0, [(s["action"], s["url"], s["value"]) for s in steps]
    assert [s["action"] for s in steps] == ["navigate", "scroll", "click", "navigate"], steps
