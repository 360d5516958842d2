"""The text backend submits a form only when a browser would: HTML's constraint validation.

FlaskBB's search form has a ``required`` multiple select and a ``required minlength="3"`` field.
A click on Search with the field left empty does nothing in Chromium (it shows "Please fill out
this field." by the field and sends nothing); the text backend used to send the POST anyway, which
the replay then called a miss (and a live run would have sent to the site). The rules checked here
are the ones Chromium applies at a submission: a required field, checkbox, radio group or select
left empty, a text shorter than its ``minlength`` once the person typed it, and the ``novalidate``
and ``formnovalidate`` attributes that switch the check off. The differential test holds the text
backend's verdict for each form to what Chromium did with it."""

from __future__ import annotations

import http.server
import threading
from urllib.parse import urlsplit

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.axtree import AXTreeError, build_tree
from webfreeze.simulator.env import EnvConfig, WebEnv
from webfreeze.simulator.forms import FormNotValid, form_submission

BASE = "http://site.test/f"

# name -> (form body, what is typed into the field labelled "Q" first (None: nothing), whether
# Chromium submits it when Go is clicked, what the text backend says when it does not)
CASES = {
    "required-empty": ('<input name="q" aria-label="Q" required>', None, False,
                       "the field 'Q' is required (Please fill out this field.)"),
    "required-filled": ('<input name="q" aria-label="Q" required>', "abc", True, None),
    "required-default": ('<input name="q" aria-label="Q" value="x" required>', None, True, None),
    "required-spaces": ('<input name="q" aria-label="Q" required>', "   ", True, None),
    "required-readonly": ('<input name="q" aria-label="Q" readonly required>', None, True, None),
    "required-hidden-type": ('<input type="hidden" name="h" required><input name="q" aria-label="Q">', None, True,
                             None),
    "required-disabled": ('<input name="q" aria-label="Q" disabled required>', None, True, None),
    "required-not-shown": ('<input name="q" aria-label="Q"><input name="z" style="display:none" required>', None,
                           False, "the field 'z' is required (Please fill out this field.)"),
    "required-textarea": ('<textarea name="q" aria-label="Q" required></textarea>', None, False,
                          "the field 'Q' is required (Please fill out this field.)"),
    "required-checkbox": ('<input name="q" aria-label="Q"><input type="checkbox" name="c" aria-label="Agree" required>',
                          "abc", False, "the checkbox 'Agree' is required (Please check this box if you want to "
                          "proceed.)"),
    "required-radio": ('<input name="q" aria-label="Q"><input type="radio" name="r" value="a" aria-label="A" required>'
                       '<input type="radio" name="r" value="b" aria-label="B">', "abc", False,
                       "the options 'A, B' are required (Please select one of these options.)"),
    "required-radio-checked": ('<input name="q" aria-label="Q"><input type="radio" name="r" value="a" aria-label="A" '
                               'required><input type="radio" name="r" value="b" aria-label="B" checked>', None, True,
                               None),
    "required-select-placeholder": ('<input name="q" aria-label="Q"><select name="s" aria-label="S" required>'
                                    '<option value="">Choose</option><option>one</option></select>', None, False,
                                    "the list 'S' is required (Please select an item in the list.)"),
    "required-select-value": ('<input name="q" aria-label="Q"><select name="s" aria-label="S" required>'
                              '<option value="0">Choose</option><option>one</option></select>', None, True, None),
    "required-multiple-none": ('<input name="q" aria-label="Q"><select name="s" aria-label="Content" multiple required>'
                               '<option value="post">Post</option><option value="topic">Topic</option></select>',
                               "abc", False, "the list 'Content' is required (Please select an item in the list.)"),
    "minlength-typed": ('<input name="q" aria-label="Q" minlength="3">', "ab", False,
                        "the field 'Q' needs at least 3 characters (2 given)"),
    "minlength-default": ('<input name="q" aria-label="Q" minlength="3" value="ab">', None, True, None),
    "minlength-empty": ('<input name="q" aria-label="Q" minlength="3">', None, True, None),
    "required-in-template": ('<input name="q" aria-label="Q"><template><input name="t" required></template>', None,
                             True, None),
    "novalidate": ('<input name="q" aria-label="Q" required>', None, True, None),
    "formnovalidate": ('<input name="q" aria-label="Q" required>', None, True, None),
}


def _page(name: str) -> str:
    body, _, _, _ = CASES[name]
    form_attrs = ' novalidate' if name == "novalidate" else ""
    go_attrs = ' formnovalidate' if name == "formnovalidate" else ""
    return (f'<!DOCTYPE html><html><head><title>{name}</title></head><body>'
            f'<form action="/sent" method="post"{form_attrs}>{body}'
            f'<input type="submit" name="go" value="Go" aria-label="Go"{go_attrs}></form></body></html>')


def _bids(tree) -> dict:
    return {e["name"]: e["bid"] for e in tree.descriptions if e["name"]}


def _text_verdict(name: str) -> str | None:
    """None when the text backend would send the form, else its message."""
    _, typed, _, _ = CASES[name]
    tree = build_tree(_page(name), BASE)
    bid = _bids(tree)
    filled = {bid["Q"]: typed} if typed is not None else {}
    try:
        form_submission(tree, bid["Go"], filled)
    except FormNotValid as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_form_submission_checks_the_constraints(name):
    _, _, submits, message = CASES[name]
    verdict = _text_verdict(name)
    if submits:
        assert verdict is None
    else:
        assert verdict == f"the form was not sent: {message}"


def test_a_template_s_controls_are_neither_checked_nor_sent():
    tree = build_tree(_page("required-in-template"), BASE)
    assert form_submission(tree, _bids(tree)["Go"])[2] == b"q=&go=Go"


def test_a_form_not_valid_is_an_axtree_error_and_enter_checks_it_too():
    tree = build_tree(_page("required-empty"), BASE)
    with pytest.raises(AXTreeError, match="not sent"):
        form_submission(tree, _bids(tree)["Q"])  # Enter in the field: the default button's submission
    assert form_submission(tree, _bids(tree)["Q"], {_bids(tree)["Q"]: "x"})[0] == "POST"


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def _respond(self, body: bytes):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        name = urlsplit(self.path).path.strip("/")
        self._respond(_page(name).encode() if name in CASES else b"<html><body>none</body></html>")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(self.path)
        self._respond(b"<html><head><title>Sent</title></head><body>sent</body></html>")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    from webfreeze.simulator.browser import BrowserUnavailable, launch_chromium
    try:
        with sync_api.sync_playwright() as p:
            b = launch_chromium(p)
            yield b
            b.close()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


def test_chromium_submits_the_same_forms(server, browser):
    """What Chromium does with each form, clicked as a person clicks: the text backend's verdicts."""
    from webfreeze.simulator.browser import new_context
    context = new_context(browser)
    page = context.new_page()
    got, want = {}, {}
    try:
        for name, (_, typed, submits, _) in sorted(CASES.items()):
            page.goto(f"{server}/{name}")
            if typed is not None:
                page.get_by_label("Q", exact=True).fill(typed)
            _Handler.seen.clear()
            page.get_by_role("button", name="Go").click()
            if submits:
                page.wait_for_url("**/sent")
            else:
                page.wait_for_timeout(300)  # a submission Chromium refused sends nothing, ever
            got[name] = bool(_Handler.seen)
            want[name] = _text_verdict(name) is None
    finally:
        context.close()
    assert got == want
    assert got == {name: case[2] for name, case in CASES.items()}


T0 = "2026-03-01T12:00:00Z"
SEARCH = b"""<!doctype html><html><head><title>Search - Forum</title></head><body>
<form method="POST"><input type="hidden" name="csrf_token" value="t1">
<label for="search_types">Content</label><select id="search_types" multiple name="search_types" required>
<option value="post">Post</option><option value="topic">Topic</option></select>
<label for="search_query">Criteria</label>
<input id="search_query" minlength="3" maxlength="50" name="search_query" required type="text" value="">
<input id="submit" name="submit" type="submit" value="Search"></form></body></html>"""
FOUND = b"<!doctype html><html><head><title>Results</title></head><body><p>pH about 6.5</p></body></html>"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("forms") / "forum.wfz"
    html = [("Content-Type", "text/html; charset=utf-8")]
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_form_validation")
        arc.add_exchange(Exchange(session_id=sid, url="http://forum.test/search", status=200, resp_headers=html,
                                  payload=SEARCH, captured_at=T0))
        arc.add_exchange(Exchange(session_id=sid, url="http://forum.test/search", method="POST", status=200,
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                  req_body=b"csrf_token=t1&search_types=post&search_query=grounds&submit=Search",
                                  resp_headers=html, payload=FOUND, captured_at=T0))
    return path


def test_text_backend_does_not_send_a_form_the_browser_would_refuse(archive):
    env = WebEnv(EnvConfig(archive, backend="text"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": "http://forum.test/search",
                                             "instruction": "Search the posts for grounds.", "snapshot_time": T0}})
        bid = {e["name"]: e["bid"] for e in obs["elements"] if e["name"]}
        obs, *_ = env.step(f"click('{bid['Search']}')")
        assert obs["last_action_error"] == ("the form was not sent: the list 'Content' is required "
                                            "(Please select an item in the list.)")
        assert obs["url"] == "http://forum.test/search"
        obs, *_ = env.step(f"select_option('{bid['Content']}', 'Post')")
        obs, *_ = env.step(f"fill('{bid['Criteria']}', 'gr')")
        obs, *_ = env.step(f"click('{bid['Search']}')")
        assert obs["last_action_error"] == "the form was not sent: the field 'Criteria' needs at least 3 characters (2 given)"
        obs, *_ = env.step(f"fill('{bid['Criteria']}', 'grounds')")
        obs, *_ = env.step(f"click('{bid['Search']}')")
        assert obs["last_action_error"] == ""
        assert "pH about 6.5" in obs["axtree_text"]
        trajectory = env.trajectory(stopped=True)
    finally:
        env.close()
    assert trajectory["replay"]["compromised"] is False
    misses = [a for s in trajectory["steps"] for a in (s.get("replay") or {}).get("answers", [])
              if a["level"] == "miss"]
    assert misses == []
