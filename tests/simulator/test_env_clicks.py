"""Browser-backend clicks: the mouse path must wait for every navigation a click causes, however
the page starts it, and observations must survive pages that replace ``JSON``."""

from __future__ import annotations

import re

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv
from webfreeze.simulator.trajectory import without_timings

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://clicks.test"
HOME = """<!DOCTYPE html><html><head><title>Home</title></head><body>
<p><a href="/b">plain link</a></p>
<form name="f" action="/c" method="get"><input type="hidden" name="q" value="1">
<button type="button" onclick="document.forms.f.submit()">scripted submit</button></form>
<p><button type="button" onclick="setTimeout(() => { location.href = '/d'; }, 0)">timer navigation</button></p>
<p><a href="#end">to the end</a></p>
<p><a href="/e">old library page</a></p>
<p><a href="/b" target="_blank">in a new tab</a></p>
<form action="/b" target="_blank"><select name="s"><option>one</option></select>
<button type="submit">submit to a new tab</button></form>
<p id="end">end</p>
</body></html>"""
PAGES = {
    "/": HOME,
    "/b": "<!DOCTYPE html><title>Page B</title><h1>B</h1>",
    "/b?s=one": "<!DOCTYPE html><title>Page B</title><h1>B with one</h1>",
    "/c?q=1": "<!DOCTYPE html><title>Page C</title><h1>C</h1>",
    "/d": "<!DOCTYPE html><title>Page D</title><h1>D</h1>",
    # What Prototype.js 1.6 did to every page that loaded it.
    "/e": """<!DOCTYPE html><title>Page E</title><script>
Array.prototype.toJSON = function () { return 'array'; };
JSON.stringify = function () { return 'replaced'; };
</script><h1>E</h1><a href="/b">back to b</a>""",
    # a button a fixed layer covers: the click never lands on it
    "/veil": """<!DOCTYPE html><title>Veiled</title><button type="button" onclick="document.title = 'clicked'">covered</button>
<div class="veil" style="position: fixed; inset: 0; background: rgba(0, 0, 0, 0.2)">please wait</div>""",
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("clicks") / "clicks.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_clicks")
        for rel, html in PAGES.items():
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                      payload=html.encode(), session_id=sid))
    return path


CLICKS = [("link", "plain link", "Page B", "/b"), ("button", "scripted submit", "Page C", "/c?q=1"),
          ("button", "timer navigation", "Page D", "/d"), ("link", "to the end", "Home", "/#end"),
          ("link", "in a new tab", "Page B", "/b"), ("button", "submit to a new tab", "Page B", "/b?s=one"),
          ("link", "old library page", "Page E", "/e")]


def _episode(env) -> dict:
    task = {"id": "clicks", "start_url": SITE + "/", "instruction": "click around"}
    env.reset(options={"task": task})
    for role, name, title, rel in CLICKS:
        if env.backend.url != SITE + "/":
            env.step(f"goto('{SITE}/')")
        bid = next(e["bid"] for e in env.tree.descriptions if e["role"] == role and e["name"] == name)
        obs, *_ = env.step(f"click('{bid}')")
        assert obs["last_action_error"] == "", (name, obs["last_action_error"])
        assert (obs["url"], obs["title"]) == (SITE + rel, title), name
        if "new tab" in name:  # the observation follows the new page; the opener stays open
            assert obs["open_pages"][-2:] == [SITE + "/", SITE + rel]
    # The page that replaced JSON still gives a full observation, with numeric boxes.
    link = next(e for e in obs["elements"] if e["role"] == "link")
    assert link["name"] == "back to b" and all(isinstance(v, (int, float)) for v in link["bbox"])
    return without_timings(env.trajectory(stopped=True))


def test_clicks_wait_for_every_kind_of_navigation_and_repeat(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        first = _episode(env)
        second = _episode(env)
    finally:
        env.close()
    assert first == second


def test_input_waits_for_the_first_paint():
    """Chromium drops a click that reaches a page before its first paint (the DevTools call still
    succeeds). Clicked right after the page commits, each click lands once ``wait_painted`` says
    the page has painted; without the wait most of them were lost (54 of 80 when measured). A blank
    page, which never gets a first-paint entry, ends the wait after a few frames; one that paints
    only a box (no contentful paint) counts as painted."""
    import asyncio
    from urllib.parse import quote

    from playwright.async_api import async_playwright

    from webfreeze.simulator.browser import (
        FIRST_PAINT_FRAMES,
        FIRST_PAINT_JS,
        launch_chromium,
        new_context,
        wait_painted,
    )

    page_html = ("<!DOCTYPE html><title>t</title><script>window.addEventListener('mousedown', "
                 "() => { window.downs = (window.downs || 0) + 1; }, true);</script>"
                 + "".join(f"<p>line {i}</p>" for i in range(200))
                 + '<a href="#x" style="position:absolute;left:100px;top:100px">x</a>')

    async def run() -> tuple[list[int], list[str]]:
        async with async_playwright() as pw:
            browser = await launch_chromium(pw, shell=True)
            landed = []
            for i in range(20):
                context = await new_context(browser)
                page = await context.new_page()
                await page.goto("data:text/html," + quote(f"{page_html}<!-- {i} -->"), wait_until="commit")
                assert await wait_painted(page)
                await page.mouse.click(105, 108)
                landed.append(await page.evaluate("() => window.downs || 0"))
                await context.close()
            # why the wait ended without content: after the frames (not the 60 s limit), or painted
            page = await (await new_context(browser)).new_page()
            reasons = []
            for body in ("<body></body>", '<body><div style="width:200px;height:200px;background:#c33"></div></body>'):
                await page.set_content(f"<!DOCTYPE html><title>t</title>{body}")
                reasons.append(await page.evaluate(FIRST_PAINT_JS, [60_000, FIRST_PAINT_FRAMES]))
            await browser.close()
            return landed, reasons

    landed, reasons = asyncio.run(run())
    assert landed == [1] * 20
    assert reasons == ["frames", "painted"]


def test_a_link_aimed_at_an_existing_frame_is_no_popup():
    """A click waits for the new page of a link aimed at another window, not for one aimed at a
    frame of the page (it opens no page: the wait would run to its bound on every click)."""
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import launch_chromium
    from webfreeze.simulator.browser_backend import CLICK_POINT_JS

    html = """<!DOCTYPE html><iframe name="content" srcdoc="<p>frame</p>"></iframe>
    <p><a data-wf-bid="1" href="about:blank#x" target="content">into the frame</a></p>
    <p><a data-wf-bid="2" href="about:blank#y" target="elsewhere">a new named window</a></p>
    <p><a data-wf-bid="3" href="about:blank#z" target="_blank">a new tab</a></p>"""
    with sync_playwright() as pw:
        browser = launch_chromium(pw, shell=True)
        try:
            page = browser.new_page()
            page.set_content(html)
            assert [page.evaluate(CLICK_POINT_JS, bid)["popup"] for bid in "123"] == [False, True, True]
        finally:
            browser.close()


def test_a_click_on_a_covered_element_says_what_covers_it(archive, tmp_path, monkeypatch):
    """Playwright's timeout says only that the time ran out; the agent is told why its last try
    failed, from Playwright's call log: the element that takes the pointer in its place (with its
    bid, which the agent can act on)."""
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        env.reset(options={"task": {"id": "veil", "start_url": SITE + "/veil", "instruction": ""}})
        bid = next(e["bid"] for e in env.tree.descriptions if e["role"] == "button" and e["name"] == "covered")
        obs, *_ = env.step(f"click('{bid}')")
    finally:
        env.close()
    error = obs["last_action_error"]
    assert error.startswith("Page.click: Timeout") or error.startswith("Locator.click: Timeout"), error
    assert re.search(r'<div class="veil" data-wf-bid="\w+">please wait</div> intercepts pointer events$', error), error
    assert "\n" not in error and "Veiled" in obs["axtree_text"]
