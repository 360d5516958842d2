"""`record session` logs what the person did (issue 49), on a small page of our own served on
loopback, driven as a person would drive it (``page.click``, ``page.keyboard.type``, ``page.goto``):

1. A click on a ``<label>``: the browser forwards it to the checkbox as a second click event; it is
   one step (the label's), and the replay clicks once, so the checkbox ends checked.
2. A click the page's own script dispatches (``isTrusted`` false) is not a step.
3. A typed navigation that the server redirects (``/login`` -> ``/``) is logged as the URL typed,
   from the page it redirects to (it used to be dropped) and from another (it used to be logged as
   the redirect's target).
4. Text typed key by key into a search box that answers ``keyup`` is logged as typed by keys, and
   replayed so that the box answers again (a ``fill`` alone would not make it search).
5. The text backend submits a form as the browser did: without the field disabled in the HTML,
   nor the one the page's script disabled at load (read from the session's DOM snapshot of the
   page), and never with a URL's ``#fragment``.

The session becomes a task (``tasks add``) that ``tasks validate`` reaches in the browser backend
without edits.
"""

from __future__ import annotations

import http.server
import json
import threading
from urllib.parse import parse_qs, urlsplit

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

HOME = """<!doctype html><html><head><title>Cities</title></head><body>
<h1>Cities</h1>
<form action="/done" method="get">
  <input type="checkbox" id="terms" name="terms"> <label for="terms">Accept the terms</label>
  <input type="checkbox" id="drawer" name="drawer" style="display:none">
  <button type="button" id="menu">Open menu</button>
  <input type="hidden" id="city" name="city">
  <button type="submit">Send</button>
</form>
<input id="q" aria-label="Find a city" autocomplete="off">
<ul id="results"></ul>
<p><a href="/about">About</a></p>
<script>
  // the page's own script clicks a hidden checkbox (as Material's search toggles its drawer)
  document.getElementById('menu').addEventListener('click', () => document.getElementById('drawer').click());
  // a search box that answers key events only, as many JavaScript search boxes do
  document.getElementById('q').addEventListener('keyup', (e) => {
    fetch('/api/cities?q=' + encodeURIComponent(e.target.value)).then(r => r.json()).then(names => {
      document.getElementById('results').innerHTML = names.map(n => '<li>City: ' + n + '</li>').join('');
      document.getElementById('city').value = names[0] || '';  // sent with the form
    });
  });
</script></body></html>"""

CITIES = ["Pune", "Paris", "Lima", "Oslo"]

# A form as Trac's new-ticket form: its script disables a field at load (the owner of an action not
# chosen), and one field is disabled in the HTML. A browser sends neither; nor must the text backend.
TICKET = """<!doctype html><html><head><title>New ticket</title></head><body>
<form action="/ticket" method="post">
  <label>Summary <input name="summary"></label>
  <label>Owner <input name="owner" id="owner" value="somebody"></label>
  <label>Legacy <input name="legacy" value="old" disabled></label>
  <button type="submit">Create ticket</button>
</form>
<script>document.getElementById('owner').disabled = true;</script>
</body></html>"""

TICKET_SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    # Chromium drops input that reaches a page before its first paint
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_label("Summary").fill("Lamp flickers")
    page.get_by_role("button", name="Create ticket").click()
    page.wait_for_url("**/ticket/1**")
    record_answer(page, "1", evidence=["Ticket 1: Lamp flickers"])
'''

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    base = page.url.rstrip("/")
    page.goto(base + "/login")          # typed on /; redirected to / again
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.click("text=Accept the terms")  # the label: the browser forwards the click to the checkbox
    assert page.is_checked("#terms")
    page.click("#menu")                  # the page's script then clicks the hidden checkbox
    assert page.is_checked("#drawer")
    page.click("#q")
    page.keyboard.type("pun")
    page.wait_for_selector("text=City: Pune")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url("**/done**")
    record_answer(page, "accepted", evidence=["Terms accepted: yes", "City: Pune"])
    page.goto(base + "/about")
    page.goto(base + "/login")          # typed again, from another page; redirected to /
'''


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8", location: str | None = None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urlsplit(self.path)
        q = parse_qs(u.query)
        if u.path == "/":
            self._send(200, HOME.encode())
        elif u.path == "/login":
            self._send(302, b"", location="/")
        elif u.path == "/about":
            self._send(200, b"<!doctype html><title>About</title><p>A page about cities.</p>")
        elif u.path == "/done":
            accepted = "yes" if q.get("terms") == ["on"] else "no"
            city = (q.get("city") or ["none"])[0]
            self._send(200, f"<!doctype html><title>Done</title><p>Terms accepted: {accepted}</p>"
                            f"<p>City: {city}</p>".encode())
        elif u.path == "/api/cities":
            prefix = (q.get("q") or [""])[0].casefold()
            names = [c for c in CITIES if prefix and c.casefold().startswith(prefix)]
            self._send(200, json.dumps(names).encode(), "application/json")
        elif u.path == "/ticket":
            self._send(200, TICKET.encode())
        elif u.path == "/slider":
            self._send(200, SLIDER.encode())
        elif u.path == "/ticket/1":
            self._send(200, f"<!doctype html><title>Ticket</title><p>Ticket 1: {q['summary'][0]}</p>".encode())
        else:
            self._send(404, b"not found", "text/plain")

    def do_POST(self):
        form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        if self.path == "/ticket" and sorted(form) == ["summary"]:  # what a browser sends
            self._send(303, b"", location="/ticket/1?summary=" + form["summary"][0].replace(" ", "+"))
        else:
            self._send(400, b"bad form", "text/plain")


# A range slider made of a track and a handle (as ionRangeSlider's, in a Shiny app): the person
# drags the handle; the browser then clicks the track and the handle's common ancestor, a click the
# person never made.
SLIDER = """<!doctype html><html><head><title>Price</title><style>
#track { position: relative; width: 400px; height: 20px; margin: 40px; background: #ddd; }
#handle { position: absolute; left: 0; top: 0; width: 20px; height: 20px; background: #36c; }
</style></head><body><div id="panel" role="tabpanel"><h1>Price</h1>
<div id="track"><span id="handle"></span></div><p id="out">Price: 0</p>
<p id="note">Prices are shown without the tax of the region you ship to.</p>
<button id="apply" style="width: 200px; height: 40px" onclick="document.getElementById('done').textContent =
 'Applied'">Apply</button><p id="done"></p></div>
<script>
  const track = document.getElementById('track'), handle = document.getElementById('handle');
  let dragging = false;
  handle.addEventListener('pointerdown', () => { dragging = true; });
  document.addEventListener('pointermove', (e) => {
    if (!dragging) return;
    const x = Math.max(0, Math.min(400, e.clientX - track.getBoundingClientRect().left));
    handle.style.left = (x - 10) + 'px';
    document.getElementById('out').textContent = 'Price: ' + Math.round(x / 4);
  });
  document.addEventListener('pointerup', () => { dragging = false; });
</script></body></html>"""

SLIDER_SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    box = page.locator("#handle").bounding_box()
    track = page.locator("#track").bounding_box()
    page.mouse.move(box["x"] + 10, box["y"] + 10)
    page.mouse.down()
    page.mouse.move(track["x"] + 240, box["y"] + 14, steps=6)
    page.mouse.up()
    page.wait_for_selector("text=Price: 60")
    note = page.locator("#note").bounding_box()  # selecting text: nothing changes, nothing is logged
    page.mouse.move(note["x"] + 2, note["y"] + 5)
    page.mouse.down()
    page.mouse.move(note["x"] + 150, note["y"] + 5, steps=4)
    page.mouse.up()
    button = page.locator("#apply").bounding_box()  # a click whose hand moved 9 px: a click
    page.mouse.move(button["x"] + 50, button["y"] + 20)
    page.mouse.down()
    page.mouse.move(button["x"] + 59, button["y"] + 20, steps=3)
    page.mouse.up()
    page.wait_for_selector("text=Applied")
    record_answer(page, "60", evidence=["Price: 60", "Applied"])
'''


def test_a_drag_is_one_drag_step_not_a_click_and_the_reference_replays_it(tmp_path, cli):
    """A person drags a slider's handle: the session logs one ``drag`` (from the press to the
    release, in the viewport), never the click the browser makes of it on the panel; the reference
    agent replays it as BrowserGym's ``mouse_drag_and_drop`` and reaches the same value, and the
    text backend, which has no pointer, says so in the validation, never a silent pass."""
    import os

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}"
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp_path / "home"))
    (tmp_path / "slider.py").write_text(SLIDER_SCRIPT)
    try:
        r = cli("record", "session", site + "/slider", "--archive", tmp_path / "slider.wfz", "--trajectory",
                tmp_path / "slider.json", "--script", tmp_path / "slider.py", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    steps = json.loads((tmp_path / "slider.json").read_text())["steps"]
    assert [s["action"] for s in steps] == ["navigate", "drag", "click", "answer"], steps
    assert steps[2]["target"]["name"] == "Apply", steps[2]
    drag = steps[1]
    assert drag["target"]["css"] == "#handle" and drag["value"]["to"][0] - drag["value"]["from"][0] > 200, drag
    suite = tmp_path / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp_path / "slider.json", "--answer", "60", "--id", "slider",
            "--instruction", "Set the price to 60.", "--archive", tmp_path / "slider.wfz")
    assert r.returncode == 0, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", "--out", tmp_path / "v", timeout=600)
    assert r.returncode == 0 and json.loads(r.stdout)["expired"] == [], r.stdout + r.stderr
    actions = [s["action"] for s in json.loads((tmp_path / "v" / "trajectories" / "slider.json").read_text())["steps"]]
    (x1, y1), (x2, y2) = drag["value"]["from"], drag["value"]["to"]
    assert actions[0] == f"mouse_drag_and_drop({x1}, {y1}, {x2}, {y2})", actions
    assert actions[1].startswith("click(") and actions[2:] == ["send_msg_to_user('60')"], actions
    r = cli("tasks", "validate", suite, "--backend", "text", "--json", "--out", tmp_path / "vt", timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    steps = json.loads((tmp_path / "vt" / "trajectories" / "slider.json").read_text())["steps"]
    assert "mouse_drag_and_drop" in steps[0]["action"] and steps[0]["error"], steps[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The session recorded once: (site URL, folder, trajectory)."""
    import os

    from cli_runner import run_cli

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}"
    tmp = tmp_path_factory.mktemp("person")
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp / "home"))
    (tmp / "cities.py").write_text(SCRIPT)
    (tmp / "ticket.py").write_text(TICKET_SCRIPT)
    try:
        r = run_cli("record", "session", site + "/", "--archive", tmp / "cities.wfz", "--trajectory",
                    tmp / "cities.json", "--script", tmp / "cities.py", timeout=300)
        assert r.returncode == 0, r.stderr
        r = run_cli("record", "session", site + "/ticket#new", "--archive", tmp / "cities.wfz", "--trajectory",
                    tmp / "ticket.json", "--script", tmp / "ticket.py", timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        server.shutdown()
        server.server_close()
    yield site, tmp, json.loads((tmp / "cities.json").read_text())


def _clicks(traj: dict) -> list[tuple]:
    return [(s["target"]["role"], s["target"]["name"], s["target"]["tag"]) for s in traj["steps"]
            if s["action"] == "click"]


def test_a_label_click_is_one_step_and_a_scripted_click_none(recorded):
    _, _, traj = recorded
    clicks = _clicks(traj)
    # the label once (not the checkbox it forwards to), the menu button (not the checkbox its
    # script clicks), the submit button (a click into a text field is no step: typing is)
    # (a label has no accessible name of its own: the replay finds it by role and CSS path)
    assert clicks == [("LabelText", "", "label"), ("button", "Open menu", "button"),
                      ("button", "Send", "button")], clicks
    label = next(s for s in traj["steps"] if s["action"] == "click")
    assert label["target"]["text"] == "Accept the terms" and label["target"]["css"].endswith("label:nth-of-type(1)")


def test_a_typed_navigation_is_the_url_typed_even_when_redirected(recorded):
    site, _, traj = recorded
    typed = [(s["url"], s.get("landed")) for s in traj["steps"] if s["action"] == "navigate" and s["cause"] == "goto"]
    assert typed == [(site + "/", None), (site + "/login", site + "/"), (site + "/about", None),
                     (site + "/login", site + "/")], typed


def test_typing_key_by_key_is_logged_as_keys(recorded):
    _, _, traj = recorded
    typed = [s for s in traj["steps"] if s["action"] == "type"]
    assert [(s["target"]["name"], s["value"], s.get("keys")) for s in typed] == [("Find a city", "pun", True)]


def test_the_session_validates_as_recorded_in_the_browser(recorded, cli):
    _, tmp, _ = recorded
    suite = tmp / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp / "cities.json", "--answer", "accepted", "--id", "cities",
            "--instruction", "Accept the terms and find the city that starts with 'pun'.", "--archive",
            tmp / "cities.wfz")
    assert r.returncode == 0, r.stderr
    out = tmp / "validation"
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", "--out", out, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["expired"] == [] and result["incomplete"] == []
    steps = json.loads((out / "trajectories" / "cities.json").read_text())["steps"]
    actions = [s["action"] for s in steps]
    # the typed URLs, one click on the label (the evidence "Terms accepted: yes" shows that the
    # checkbox was sent checked), the search typed with its last key as a key (its evidence
    # "City: Pune" shows that the box answered), then the answer
    site = recorded[0]
    assert actions[0] == f"goto('{site}/login')", actions
    assert sum(1 for a in actions if a.startswith("click(")) == 3, actions
    assert any(a.startswith("fill(") and a.endswith("'pun', True)") for a in actions), actions
    assert actions[-1] == "send_msg_to_user('accepted')", actions


def test_the_text_backend_submits_a_form_as_the_browser_did(recorded, cli):
    """The session's DOM snapshot of the form (``dom-snapshots/``) says which field its script disabled:
    the text backend leaves it out, as it leaves out the field disabled in the HTML, and its POST
    is the one captured. The start URL's fragment is never sent."""
    from webfreeze.archives import Archive

    site, tmp, _ = recorded
    with Archive.open(tmp / "cities.wfz") as arc:
        assert list(arc.pages()) == []  # (a session's snapshots are no page records: nothing to check)
        docs = [arc.get_document(d.name) for d in arc.documents(prefix="dom-snapshots/")]
        snapshots = [s for d in docs for s in d["snapshots"] if s["url"] == site + "/ticket#new"]
        assert len(snapshots) == 1 and 'id="owner" value="somebody" disabled' in snapshots[0]["html"]
    suite = tmp / "ticket-suite"
    r = cli("tasks", "add", suite, "--reference", tmp / "ticket.json", "--answer", "1", "--id", "ticket",
            "--instruction", "File a ticket 'Lamp flickers'; what is its number?", "--archive", tmp / "cities.wfz")
    assert r.returncode == 0, r.stderr
    out = tmp / "ticket-validation"
    r = cli("tasks", "validate", suite, "--backend", "text", "--json", "--out", out, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    traj = json.loads((out / "trajectories" / "ticket.json").read_text())
    answers = traj["replay"]["start"]["answers"] + [a for s in traj["steps"] for a in (s.get("replay") or {})
                                                    .get("answers", [])]
    assert [(a["method"], a["url"], a["level"]) for a in answers if a["method"] == "POST"] == [
        ("POST", site + "/ticket", "exact")]
    assert answers[0]["url"] == site + "/ticket" and not any("#" in a["url"] for a in answers), answers


EDIT_FORM = """<!doctype html><html><head><title>Issue 3</title></head><body>
<h1>Issue 3</h1>
<label>Title <input name="title" value="Search ignores accented characters"></label>
<label>Notes <textarea name="notes">Seen on the Münster page</textarea></label>
<label>Password <input type="password" name="pw" value="hunter2-secret"></label>
<input type="hidden" name="token" value="csrf-1234">
<input name="gone" value="not shown here" style="display:none">
<script>window.__webfreezeAnswer = (text, el, evidence) => { window.answered = [text, evidence]; };</script>
</body></html>"""


def test_evidence_is_read_in_the_values_of_visible_form_fields():
    """A logged-in tracker shows an issue's title in an edit form's input: a person reads it there,
    so record_answer finds evidence in visible fields' values (a text area's too), and the
    reference agent reads the same values in the observation tree (``value='...'``). A password,
    a hidden input and a field not displayed show nothing."""
    from playwright.sync_api import sync_playwright

    from webfreeze.agents.reference import fold_text, visible_text
    from webfreeze.recorder.errors import SessionScriptError
    from webfreeze.recorder.session import LISTENER_JS, record_answer
    from webfreeze.simulator.axtree import build_tree
    from webfreeze.simulator.browser import launch_chromium

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page()
            page.set_content(EDIT_FORM)
            record_answer(page, "3", evidence=["Search ignores accented characters", "Seen on the Münster page"])
            assert page.evaluate("window.answered")[0] == "3"
            for unshown in ("hunter2-secret", "csrf-1234", "not shown here"):
                with pytest.raises(SessionScriptError, match="does not show the evidence"):
                    record_answer(page, "3", evidence=[unshown])
            # what the person typed into a field is theirs, not the site's: no evidence (with the
            # session's listener, which marks the fields typed into)
            page = browser.new_page()
            page.expose_function("__webfreezeLog", lambda step: None)
            page.add_init_script(LISTENER_JS)
            page.route("http://tracker.test/**", lambda route: route.fulfill(
                body=EDIT_FORM, content_type="text/html; charset=utf-8"))
            page.goto("http://tracker.test/issue3")
            page.get_by_label("Title").fill("Typed by the person")
            with pytest.raises(SessionScriptError, match="does not show the evidence 'Typed by the person' outside "
                               "the fields this session typed into"):
                record_answer(page, "3", evidence=["Typed by the person"])
            with pytest.raises(SessionScriptError, match=r"the evidence 'nowhere at all'$"):  # (not said where it is not)
                record_answer(page, "3", evidence=["nowhere at all"])
            record_answer(page, "3", evidence=["Seen on the Münster page"])  # (an untouched field still counts)
        finally:
            browser.close()
    tree = build_tree(EDIT_FORM, "http://tracker.test/issue3").axtree_text
    seen = fold_text(visible_text(tree))
    assert fold_text("Search ignores accented characters") in seen and fold_text("Seen on the Münster page") in seen
    assert fold_text("csrf-1234") not in seen and fold_text("not shown here") not in seen
    assert fold_text("hunter2-secret") not in seen  # (a password is bullets in the tree, as in Chromium's)
    # the reference agent leaves out the fields it typed into (their bids, on that page)
    title = next(line for line in tree.splitlines() if "textbox 'Title'" in line).strip().split("]")[0][1:]
    assert fold_text("Search ignores accented characters") not in fold_text(visible_text(tree, {title}))


SHADOW_PAGE = """<!doctype html><html><body><p>Outside</p><div id="host"></div>
<script>
const root = document.getElementById('host').attachShadow({mode: 'open'});
root.innerHTML = '<style>.x { color: red }</style><div>y at x=1: 0.5403</div>'
  + '<div style="display:none">hidden in shadow</div><input value="field in shadow">';
window.__webfreezeAnswer = (text, el, evidence) => { window.answered = [text, evidence]; };
</script></body></html>"""


def test_evidence_is_read_in_open_shadow_roots():
    """Bokeh draws its widgets (a Div's text, a table's cells) in open shadow roots, which
    ``document.body.innerText`` leaves out: a person sees them, so record_answer finds evidence
    there, but not in a shadow root's style sheet or in an element it does not display."""
    from playwright.sync_api import sync_playwright

    from webfreeze.recorder.errors import SessionScriptError
    from webfreeze.recorder.session import record_answer
    from webfreeze.simulator.browser import launch_chromium

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page()
            page.set_content(SHADOW_PAGE)
            record_answer(page, "0.5403", evidence=["y at x=1: 0.5403", "Outside", "field in shadow"])
            assert page.evaluate("window.answered")[0] == "0.5403"
            for unshown in ("hidden in shadow", "color: red"):
                with pytest.raises(SessionScriptError, match="does not show the evidence"):
                    record_answer(page, "0.5403", evidence=[unshown])
        finally:
            browser.close()
