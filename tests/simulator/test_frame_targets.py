"""Frames in the text backend as a browser has them (found by a review of the frames feature):
a link whose ``target`` names another frame loads there; following a link in one frame leaves
the others as they are (a frame whose form was posted is not posted again); links in a
``srcdoc`` frame resolve against its page's URL, in both backends; a page that frames itself is
not nested (Chromium loads no frame of an enclosing document); a link the parser cannot read
(``http://[x``) is shown as written, not a traceback."""

from __future__ import annotations

import re

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

S = "http://targets.test"
PAGES = [
    ("GET", S + "/", "<!DOCTYPE html><title>Top</title><body><iframe name=left src='/left'></iframe>"
                     "<iframe name=main src='/main'></iframe><iframe srcdoc=\"<a href='/b'>srcdoc link</a>\"></iframe>"
                     "<a href='/doc2' target='main'>Doc two</a></body>"),
    ("GET", S + "/left", "<!DOCTYPE html><title>Left</title><body><a href='/doc1' target='main'>Doc one</a>"
                         "<a href='http://[x'>broken</a></body>"),
    ("GET", S + "/main", "<!DOCTYPE html><title>Main</title><body><form method=post action='/add'>"
                         "<input name=item value=x aria-label=Item><button>Add</button></form></body>"),
    ("POST", S + "/add", "<!DOCTYPE html><title>Added</title><p>added once</p>"),
    ("GET", S + "/doc1", "<!DOCTYPE html><title>Doc1</title><p>doc one</p>"),
    ("GET", S + "/doc2", "<!DOCTYPE html><title>Doc2</title><p>doc two</p>"),
    ("GET", S + "/b", "<!DOCTYPE html><title>B</title><p>bee</p>"),
    ("GET", S + "/data", "<!DOCTYPE html><title>Data</title><body><iframe src='data:text/html,<p>from%20data</p>'>"
                         "</iframe><iframe src='data:text/html;base64,PHA+YmFzZTY0IGRhdGE8L3A+'></iframe>"
                         "<iframe src='data:image/png;base64,iVBORw0KGgo='></iframe><script>var x = 1;</script></body>"),
    ("GET", S + "/self", "<!DOCTYPE html><title>Self</title><body><p>framed</p><iframe src='#a'></iframe>"
                         "<iframe src='/self'></iframe></body>"),
]


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("targets") / "targets.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_frame_targets")
        for method, url, html in PAGES:
            post = method == "POST"
            arc.add_exchange(Exchange(
                url=url, method=method, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                req_headers=[("Content-Type", "application/x-www-form-urlencoded")] if post else [],
                req_body=b"item=x" if post else None, resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                payload=html.encode(), session_id=sid))
    return path


def _bid(obs, role: str, name: str) -> str:
    m = re.search(r"^\s*\[(\w+)\] " + re.escape(role) + " " + re.escape(repr(name)), obs["axtree_text"], re.M)
    assert m, (role, name, obs["axtree_text"])
    return m.group(1)


def _frame_of(obs, title: str) -> str:
    """The bid of the frame element whose document has ``title``."""
    m = re.search(r"^\s*\[(\w+)\] Iframe ''\n\s*RootWebArea " + re.escape(repr(title)), obs["axtree_text"], re.M)
    assert m, (title, obs["axtree_text"])
    return m.group(1)


def test_the_text_backend_follows_targets_and_keeps_the_other_frames(archive):
    with WebEnv(EnvConfig(archive=archive, backend="text")) as env:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": S + "/", "instruction": "use the frames"}})
        main = _frame_of(obs, "Main")
        assert "link 'srcdoc link', url='http://targets.test/b'" in obs["axtree_text"]
        assert "link 'broken', url='http://[x'" in obs["axtree_text"]
        obs, *_ = env.step(f"click('{_bid(obs, 'button', 'Add')}')")
        assert obs["last_action_error"] == "" and _frame_of(obs, "Added") == main
        obs, *_ = env.step(f"click('{_bid(obs, 'link', 'Doc one')}')")  # in the left frame, target=main
        assert obs["last_action_error"] == "" and _frame_of(obs, "Doc1") == main and _frame_of(obs, "Left")
        obs, *_ = env.step(f"click('{_bid(obs, 'link', 'srcdoc link')}')")
        assert obs["last_action_error"] == "" and "StaticText 'bee'" in obs["axtree_text"]
        obs, *_ = env.step(f"click('{_bid(obs, 'link', 'Doc two')}')")  # on the page, target=main
        assert obs["last_action_error"] == "" and _frame_of(obs, "Doc2") == main
        assert "RootWebArea 'Top'" in obs["axtree_text"]
        obs, *_ = env.step(f"click('{_bid(obs, 'link', 'broken')}')")
        assert obs["last_action_error"]  # (a line, not a traceback)
        traj = env.trajectory(stopped=True)
    asked = [[(a["method"], a["url"]) for a in (s.get("replay") or {}).get("answers", [])] for s in traj["steps"]]
    assert asked[:4] == [[("POST", S + "/add")], [("GET", S + "/doc1")], [("GET", S + "/b")], [("GET", S + "/doc2")]], asked
    assert all(a["level"] != "miss" for s in traj["steps"][:4] for a in s["replay"]["answers"])


def test_a_page_that_frames_itself_is_not_nested(archive):
    with WebEnv(EnvConfig(archive=archive, backend="text")) as env:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": S + "/self", "instruction": "read"}})
    assert obs["axtree_text"].count("StaticText 'framed'") == 1, obs["axtree_text"]


def test_a_srcdoc_frames_links_resolve_against_its_page_in_the_browser(archive):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    with WebEnv(EnvConfig(archive=archive, backend="browser")) as env:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": S + "/", "instruction": "use the frames"}})
        assert "link 'srcdoc link', url='http://targets.test/b'" in obs["axtree_text"], obs["axtree_text"]


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_a_data_url_frame_shows_its_document(archive, backend):
    """A frame whose ``src`` is a ``data:`` URL holds its document in the page itself: the text
    backend said it was written by the page's scripts; it shows it, as the browser does."""
    if backend == "browser":
        try:
            chromium_path()
        except BrowserUnavailable as exc:
            pytest.skip(str(exc))
    with WebEnv(EnvConfig(archive=archive, backend=backend)) as env:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": S + "/data", "instruction": "read"}})
    text = obs["axtree_text"]
    assert "StaticText 'from data'" in text and "StaticText 'base64 data'" in text, text
    assert "written by the page's scripts" not in text, text

