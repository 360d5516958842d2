"""The text backend resolved a link as Python's ``urljoin`` does, keeping what a browser
percent-encodes: MoinMoin 2 writes its item links as ``href="/Île Vierge"``; Chromium goes to
``/%C3%8Ele%20Vierge`` (that is what a crawl or a session records), the text backend went to
``/Île%20Vierge``, so its observation's URL and trajectory differed from the browser's on the same
page and the replay answered it only at the ``canonical`` level. Both backends now go to the URL
the browser serialises, links, typed URLs and
redirects alike (a Location sent as raw UTF-8 bytes was a replay miss in the text backend)."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

SITE = "http://moin.test"
AT = "2026-12-04T03:22:30Z"
HTML = [("Content-Type", "text/html; charset=utf-8")]
LIGHTS = """<!DOCTYPE html><html><head><title>Foreign Lights</title></head><body><ul>
<li><a href="/Île Vierge">Île Vierge</a></li><li><a href="/Q&amp;A%20+%20Notes">Q&amp;A + Notes</a></li>
<li><a href="/phare?nom=Île Vierge's">Phare</a></li><li><a href="/old-name">Old name</a></li></ul></body></html>"""
# (as Chromium sends them: the paths and queries percent-encoded in UTF-8, what was encoded kept)
PAGES = {"/%C3%8Ele%20Vierge": "The tallest stone lighthouse in Europe.", "/Q&A%20+%20Notes": "Why stripes?",
         "/phare?nom=%C3%8Ele%20Vierge%27s": "Phare de l'Île Vierge."}


def _page(text: str) -> bytes:
    return f"<!DOCTYPE html><html><head><title>page</title></head><body><p>{text}</p></body></html>".encode()


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("urls") / "moin.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_text_backend_urls")
        arc.add_exchange(Exchange(url=f"{SITE}/Foreign%20Lights", captured_at=AT, status=200, session_id=sid,
                                  resp_headers=HTML, payload=LIGHTS.encode()))
        for p, text in PAGES.items():
            arc.add_exchange(Exchange(url=SITE + p, captured_at=AT, status=200, session_id=sid, resp_headers=HTML,
                                      payload=_page(text)))
        # a redirect whose Location the server sent as raw UTF-8 bytes (the recorder keeps a header's
        # bytes as latin-1 code points): the browser reads them as UTF-8 and percent-encodes them
        raw = "/Île Vierge".encode().decode("latin-1")
        arc.add_exchange(Exchange(url=f"{SITE}/old-name", captured_at=AT, status=302, session_id=sid,
                                  resp_headers=[("Location", raw)], payload=b""))
    return path


BACKENDS = ["text"]
try:
    chromium_path()
    BACKENDS.append("browser")
except BrowserUnavailable:
    pass


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, landed, text", [
    ("Île Vierge", "/%C3%8Ele%20Vierge", "The tallest stone lighthouse"),
    ("Q&A + Notes", "/Q&A%20+%20Notes", "Why stripes?"),
    ("Phare", "/phare?nom=%C3%8Ele%20Vierge%27s", "Phare de l'Île Vierge."),
    ("Old name", "/%C3%8Ele%20Vierge", "The tallest stone lighthouse"),
])
def test_a_link_goes_where_the_browser_goes(archive, backend, name, landed, text):
    env = WebEnv(EnvConfig(archive=archive, backend=backend))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "instruction": "", "start_url": f"{SITE}/Foreign%20Lights"}})
        link = next(e for e in obs["elements"] if e.get("role") == "link" and e.get("name") == name)
        obs, *_ = env.step(f"click('{link['bid']}')")
        step = env.trajectory()["steps"][-1]
    finally:
        env.close()
    assert obs["url"] == SITE + landed, obs["url"]
    assert not obs["last_action_error"] and text in obs["axtree_text"]
    assert step["replay"]["document"]["level"] == "exact", step["replay"]


def test_a_typed_url_is_serialised_as_the_browser_serialises_it(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="text"))
    try:
        env.reset(options={"task": {"id": "t", "instruction": "", "start_url": f"{SITE}/Foreign%20Lights"}})
        obs, *_ = env.step(f"goto('{SITE}/Île Vierge')")
    finally:
        env.close()
    assert obs["url"] == f"{SITE}/%C3%8Ele%20Vierge" and not obs["last_action_error"], obs["url"]
