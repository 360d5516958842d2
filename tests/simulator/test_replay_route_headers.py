"""The in-process replay route (the crawl's self-check) hands Chromium the captured headers as it
accepts them: an image captured from nginx (``Accept-Ranges: bytes``, which the replay says too)
loads, a page's repeated ``Set-Cookie`` headers set every cookie, other repeated headers arrive
joined as HTTP joins them; and an answer Chromium refuses is a missing request with its reason,
never a page that waits for ever."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.replay_route import ReplayRoute, fulfil_headers, refused_header

try:
    chromium_path()
except BrowserUnavailable as exc:  # `make test` installs it; a bare checkout may not have it
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://static.test"
WHEN = "2026-01-01T00:00:00Z"
# a 16x16 SVG as nginx serves a static file: the headers are those /usr/sbin/nginx sent for
# Python's documentation's _static/py.svg
SVG = (b'<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16">'
       b'<rect width="16" height="16" fill="#3776ab"/></svg>')
NGINX_HEADERS = [("Server", "nginx/1.22.1"), ("Content-Type", "image/svg+xml"), ("Content-Length", str(len(SVG))),
                 ("Last-Modified", "Tue, 11 Jan 2022 09:32:45 GMT"), ("ETag", '"61dd4ebd-7f9"'),
                 ("Accept-Ranges", "bytes")]
PAGE = (b'<!doctype html><html><head><title>Repeated headers</title></head><body>'
        b'<img id="logo" src="/py.svg" width="16" height="16"><p>text</p></body></html>')
PAGE_HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Set-Cookie", "a=1; Path=/"),
                ("Set-Cookie", "b=2; Path=/"), ("Vary", "Accept-Encoding"), ("Vary", "Cookie"),
                ("X-Repeated", "same"), ("X-Repeated", "same")]


def _archive(path, extra=()):
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_replay_route_headers")
        for url, headers, body in [(SITE + "/", PAGE_HEADERS, PAGE), (SITE + "/py.svg", NGINX_HEADERS, SVG), *extra]:
            arc.add_exchange(Exchange(url=url, captured_at=WHEN, status=200, reason="OK", resp_headers=headers,
                                      payload=body, session_id=sid))
    return path


def test_fulfil_headers_joins_repeats_as_http_does():
    got = fulfil_headers([("Accept-Ranges", "bytes"), ("accept-ranges", "bytes"), ("Set-Cookie", "a=1"),
                          ("set-cookie", "b=2"), ("Vary", "Accept-Encoding"), ("VARY", "Cookie"),
                          ("Content-Length", "12"), ("ETag", '"x"')])
    assert got == {"accept-ranges": "bytes", "set-cookie": "a=1\nb=2", "vary": "Accept-Encoding, Cookie",
                   "etag": '"x"'}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import launch_chromium

    with sync_playwright() as pw:
        b = launch_chromium(pw)
        yield b
        b.close()


def _load(browser, archive, url):
    """Load ``url`` through a ReplayRoute of ``archive``: (page facts, missing, response headers seen)."""
    from webfreeze.simulator.browser import new_context

    route = ReplayRoute(archive)
    context = new_context(browser)
    seen = {}
    try:
        route.attach(context)
        page = context.new_page()
        page.on("response", lambda r: seen.__setitem__(r.url, r.headers_array()))
        with route.serving(WHEN):
            page.goto(url, wait_until="load", timeout=120_000)  # (a safety net: generous under load)
            facts = page.evaluate("""() => { const img = document.getElementById('logo');
                return {width: img ? img.naturalWidth : -1, complete: img ? img.complete : false,
                        cookie: document.cookie}; }""")
            missing = list(route.missing.values())
    finally:
        context.close()
    return facts, missing, seen


def test_a_page_with_nginx_headers_and_repeated_set_cookie_replays_whole(tmp_path, browser):
    archive = _archive(tmp_path / "a.wfz")
    facts, missing, seen = _load(browser, archive, SITE + "/")
    assert missing == []
    assert facts["width"] == 16 and facts["complete"]  # the image was taken: load fired, it decoded
    assert sorted(facts["cookie"].split("; ")) == ["a=1", "b=2"]
    svg = [(h["name"].lower(), h["value"]) for h in seen[SITE + "/py.svg"]]
    assert svg.count(("accept-ranges", "bytes")) == 1  # the capture's and the replay's, once
    page = [(h["name"].lower(), h["value"]) for h in seen[SITE + "/"]]
    assert ("vary", "Accept-Encoding, Cookie") in page and ("x-repeated", "same") in page


def test_an_answer_chromium_refuses_is_missing_with_its_reason(tmp_path, browser):
    """A captured header Chromium will not take from route.fulfill (a name with a space: an
    imported WARC can hold one); it drops such an answer without a word and the page would wait
    for it. The page loads, without it, and the check says which request and why."""
    bad = [("Content-Type", "image/svg+xml"), ("X Broken", "one")]
    page = PAGE.replace(b"/py.svg", b"/bad.svg")
    archive = _archive(tmp_path / "b.wfz", [(SITE + "/bad.html", [("Content-Type", "text/html")], page),
                                            (SITE + "/bad.svg", bad, SVG)])
    facts, missing, _ = _load(browser, archive, SITE + "/bad.html")
    assert facts["width"] == 0  # the image was not taken; the page loaded all the same
    assert [m.url for m in missing] == [SITE + "/bad.svg"]
    assert missing[0].why == "the browser refused the replayed answer: header name 'x broken' is not valid HTTP"


def test_refused_header_names_what_chromium_drops():
    assert refused_header({"content-type": "text/html", "set-cookie": "a=1\nb=2", "x-a": "é\x07"}) is None
    assert refused_header({"bad name": "x"}) == "header name 'bad name' is not valid HTTP"
    assert refused_header({"x-a": "one\r\ntwo"}) == "header 'x-a' holds a line break or NUL"
    assert refused_header({"accept-ranges": "bytes\nbytes"}) == "header 'accept-ranges' holds a line break or NUL"
