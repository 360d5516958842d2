"""`record session`: a scripted shopping session on the simulated shop, logged as a trajectory."""

from __future__ import annotations

import json

import pytest

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.sites import serve

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

FIRST_PAINT = "page.wait_for_function(\"performance.getEntriesByName('first-paint').length > 0\")"


@pytest.fixture
def record_scripted(tmp_path, monkeypatch, cli):
    """``record_scripted(page, script, *options, host=, paths=, answers=)``: ``record session`` of
    ``script`` (the text of a session script) on a loopback site serving ``page``
    (:func:`_one_page_site`) under the name ``host``; returns (the command's result, the archive,
    the trajectory), named after the host in ``tmp_path``."""
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))

    def record(page: bytes, script: str, *options, host: str = "site.test", paths=("/",), answers=None):
        name = host.split(".")[0]
        script_path, archive, out = (tmp_path / f"{name}{ext}" for ext in (".py", ".wfz", ".json"))
        script_path.write_text(script)
        server = _one_page_site(page, paths=paths, answers=answers)
        try:
            result = cli("record", "session", f"http://{host}/", "--resolve", f"{host}=127.0.0.1:{server.server_address[1]}",
                         "--archive", archive, "--trajectory", out, "--script", script_path, *options, timeout=300)
        finally:
            server.shutdown()
            server.server_close()
        return result, archive, out

    return record

SCRIPT = '''
def run(page):
    # Chromium drops input that reaches a page before its first paint
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_label("Search products").fill("running shoe")
    page.get_by_role("button", name="Search").click()
    page.wait_for_load_state("load")
    # Chromium drops input that reaches a page before its first paint
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.mouse.wheel(0, 600)
    page.wait_for_function("window.scrollY > 0")
    # at once, well inside the 150 ms a scroll must rest before it is logged on its own
    page.select_option("select[name=brand]", label=page.locator("select[name=brand] option").nth(1).inner_text())
    page.get_by_role("button", name="Apply").click()
    page.wait_for_load_state("load")
    page.locator("li.product a").first.click()
    page.wait_for_load_state("load")
    page.get_by_label("Quantity").fill("2")
    page.get_by_role("button", name="Add to cart").click()
    page.wait_for_url("**/cart")
'''


def test_scripted_shop_session(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    script = tmp_path / "shop_script.py"
    script.write_text(SCRIPT)
    archive, out = tmp_path / "shop.wfz", tmp_path / "trajectory.json"
    site = serve("shop")
    try:
        result = cli("record", "session", f"{site.url}/", "--archive", archive, "--trajectory", out,
                     "--script", script, timeout=300)
    finally:
        site.stop()
    assert result.returncode == 0, result.stderr
    traj = json.loads(out.read_text())
    assert traj["version"] == 1 and traj["kind"] == "reference_trajectory"
    steps = traj["steps"]
    assert [s["step"] for s in steps] == list(range(len(steps)))
    actions = [(s["action"], (s["target"] or {}).get("role"), (s["target"] or {}).get("name")) for s in steps]
    typed = [s for s in steps if s["action"] == "type"]
    assert typed[0]["target"]["name"] == "Search products" and typed[0]["value"] == "running shoe"
    assert typed[0]["target"]["role"] == "searchbox" and typed[0]["target"]["css"]
    assert ("click", "button", "Search") in actions
    assert any(a == "select" and name == "Brand" for a, _, name in actions)
    assert ("click", "button", "Apply") in actions
    scrolls = [s["step"] for s in steps if s["action"] == "scroll" and s["value"]["y"] > 0]
    selects = [s["step"] for s in steps if s["action"] == "select"]
    assert scrolls and scrolls[0] < selects[0]  # logged, and before the select that followed it
    assert any(a == "click" and role == "link" for a, role, _ in actions)
    assert ("type", "spinbutton", "Quantity") in actions
    assert ("click", "button", "Add to cart") in actions
    navs = [s["url"] for s in steps if s["action"] == "navigate"]
    assert any("/search?q=running+shoe" in u for u in navs) and navs[-1].endswith("/cart")
    with Archive.open(archive) as arc:
        posts = list(arc.exchanges(method="POST"))
        assert len(posts) == 1 and posts[0].url.endswith("/cart/add")
        body = posts[0].request.payload().decode()
        assert "sku=" in body and "qty=2" in body
        assert arc.get_document(f"trajectories/{traj['archive_session']}.json") == traj
        # only the site's traffic was recorded (no browser-internal requests)
        assert {r.url.split("/")[2] for r in arc.exchanges()} == {site.url.split("/")[2]}


def test_session_needs_a_driver(tmp_path, cli):
    r = cli("record", "session", "http://127.0.0.1:1/", "--archive", tmp_path / "a.wfz", "--trajectory",
            tmp_path / "t.json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--headed" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("body, message", [("raise ValueError('boom')", "ValueError: boom"),
                                           ("import sys; sys.exit(3)", "SystemExit: 3"),
                                           ("page.click('#nothing-here', timeout=500)", "TimeoutError"),
                                           # a locator that matches several: the elements are on the line
                                           ("page.locator('a').click(timeout=2000)", "elements: 1) <a ")])
def test_a_failing_script_is_one_line_and_writes_no_trajectory(tmp_path, monkeypatch, cli, body, message):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    script = tmp_path / "failing.py"
    script.write_text(f"def run(page):\n    {body}\n")
    out = tmp_path / "trajectory.json"
    site = serve("shop")
    try:
        result = cli("record", "session", f"{site.url}/", "--archive", tmp_path / "s.wfz", "--trajectory", out,
                     "--script", script, timeout=300)
    finally:
        site.stop()
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the session script failed" in lines[0] and message in lines[0], result.stderr
    assert not out.exists()


CLICK_GO = f"def run(page):\n    {FIRST_PAINT}\n    page.click('#go')\n"
SLOW_PAGE = b"""<!doctype html><title>slow</title><button id=go onclick="fetch('/slow',
{method: 'PROPFIND'}).then(r => document.title = 'got ' + r.status)">Log in</button>"""


def test_a_late_answer_is_recorded_as_the_site_gave_it(record_scripted):
    """The script returns at once after a click whose request the server answers 1.5 s later (as a
    server delays a failed login on purpose): the session waits for it, so the archive holds the
    site's 401, not the proxy's 502 for a connection the closing browser cut."""
    import time

    def refuse_late(handler):
        time.sleep(1.5)
        return 401, b"wrong password", "text/plain"

    result, archive, _ = record_scripted(SLOW_PAGE, CLICK_GO, host="late.test", answers={"PROPFIND": refuse_late})
    assert result.returncode == 0, result.stderr
    with Archive.open(archive) as arc:
        (answer,) = arc.exchanges(method="PROPFIND")
        assert (answer.url, answer.response.status, answer.body()) == ("http://late.test/slow", 401, b"wrong password")


SAVE_PAGE = b"""<!doctype html><title>notes</title><button id=go onclick="setTimeout(() => fetch('/save',
{method: 'PUT', body: 'story=Bananas'}), 700)">Open Bananas</button>"""


def test_a_save_the_page_defers_is_recorded(record_scripted):
    """TiddlyWiki saves what a click changed a second later (its syncer's timer), not at once: the
    script returns right after the click, and the session keeps the page open as long as the
    replay's settle runs the page's timers after a step (TIMER_HORIZON_MS of virtual time), so the
    PUT that a replay of the click will send is in the archive, not an XHR miss in every replay."""
    def save(handler):
        handler.rfile.read(int(handler.headers["Content-Length"]))
        return 204, b"", "text/plain"

    result, archive, _ = record_scripted(SAVE_PAGE, CLICK_GO, host="notes.test", answers={"PUT": save})
    assert result.returncode == 0, result.stderr
    with Archive.open(archive) as arc:
        saves = [(ex.url, ex.request.payload(), ex.response.status) for ex in arc.exchanges(method="PUT")]
    assert saves == [("http://notes.test/save", b"story=Bananas", 204)]


WRITTEN_FRAME_PAGE = b"""<!doctype html><title>editor</title><div id=box></div>
<button id=done onclick="document.getElementById('out').textContent =
  'saved: ' + frames[0].document.querySelector('textarea').value">Done</button><p id=out></p>
<script>
const frame = document.createElement('iframe');
document.getElementById('box').appendChild(frame);
const doc = frame.contentWindow.document;
doc.open(); doc.write('<!DOCTYPE html><html><body></body></html>'); doc.close();
const area = doc.createElement('textarea'); area.setAttribute('aria-label', 'Tiddler text');
doc.body.appendChild(area);
</script>"""


@pytest.mark.parametrize("opened", [True, False], ids=["open-then-write", "write-alone"])
def test_typing_into_a_frame_a_script_wrote_is_logged(record_scripted, opened):
    """TiddlyWiki's editor is a textarea in an iframe its script fills with document.open() and
    write(): open() erases the frame's event listeners, the recorder's among them, so the typing
    was never logged and the session's trajectory saved a tiddler unchanged. The listener is put
    back after open(), and the typing is a step; so after a write() alone, which opens a document
    whose parser has finished as open() does."""
    page = WRITTEN_FRAME_PAGE if opened else WRITTEN_FRAME_PAGE.replace(b"doc.open(); ", b"")
    result, _, out = record_scripted(page, f"""
def run(page):
    {FIRST_PAINT}
    page.frame_locator("iframe").first.get_by_label("Tiddler text").click()
    page.keyboard.type("Purple")
    page.get_by_role("button", name="Done").click()
    page.get_by_text("saved: Purple").wait_for()
""", host="editor.test")
    assert result.returncode == 0, result.stderr
    steps = [(s["action"], (s["target"] or {}).get("role"), (s["target"] or {}).get("name"), s["value"], s.get("keys"))
             for s in json.loads(out.read_text())["steps"] if s["action"] != "navigate"]
    assert steps == [("type", "textbox", "Tiddler text", "Purple", True), ("click", "button", "Done", None, None)]


ROUTES_PAGE = b"""<!doctype html><html><head><title>Routes</title></head><body>
<nav><a href="#/species">Species</a></nav><div id="app"></div>
<script>
function show() { document.getElementById('app').textContent = 'Page ' + (location.hash.slice(2) || 'home'); }
window.addEventListener('hashchange', show); show();
</script></body></html>"""

ROUTES_SCRIPT = '''
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.goto(page.url + "#/faq")                  # typed: a route of the same document
    page.get_by_text("Page faq").wait_for()
    page.get_by_role("link", name="Species").click()  # the page's link: its effect is no step
    page.get_by_text("Page species").wait_for()
    page.go_back()                                 # the browser's back, within the document
    page.get_by_text("Page faq").wait_for()
'''


def test_a_typed_hash_route_is_the_persons_goto(record_scripted):
    """A hash-routed page (Docsify's ``#/faq``): a route typed into the address bar (``page.goto``)
    or reached with the browser's back button is a same-document navigation the browser started,
    logged as ``goto`` and replayed; the route a link of the page leads to is its effect."""
    result, _, out = record_scripted(ROUTES_PAGE, ROUTES_SCRIPT, host="routes.test")
    assert result.returncode == 0, result.stderr
    navs = [(s["cause"], s["url"]) for s in json.loads(out.read_text())["steps"] if s["action"] == "navigate"]
    assert navs == [("goto", "http://routes.test/"), ("goto", "http://routes.test/#/faq"),
                    ("sameDocument", "http://routes.test/#/species"), ("goto", "http://routes.test/#/faq")], navs


# A single-page application's router the way VitePress's is: a click listener on `window`, capture
# phase, that takes every link click, prevents it and pushes the new URL from an async function (so
# the pushState runs in the microtask checkpoint right after that listener, before any listener on
# `document` runs).
SPA_PAGE = b"""<!doctype html><html><head><title>Docs</title><script>
const show = () => { document.querySelector('h1').textContent = location.pathname === '/' ? 'Home' : 'Queues'; };
const go = async (href) => { await null; history.pushState({}, '', href); show(); };
window.addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (!a) return;
  e.preventDefault();
  go(a.href);
}, {capture: true});
window.addEventListener('DOMContentLoaded', show);
</script></head><body><h1>Home</h1><nav><a href="/guide/queues.html">Queues</a></nav></body></html>"""

SPA_SCRIPT = '''
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_role("link", name="Queues").click()
    page.wait_for_url("**/guide/queues.html")
    page.get_by_role("heading", name="Queues").wait_for()
'''


def test_a_click_a_router_turns_into_pushstate_is_logged_where_it_was_made(record_scripted):
    """VitePress: the click is the person's, on the page where it was made, and comes before the
    same-document navigation it caused (the router's listener on `window` ran first and pushed the
    new URL before a listener on `document` heard the click)."""
    result, _, out = record_scripted(SPA_PAGE, SPA_SCRIPT, host="spa.test", paths=("/", "/guide/queues.html"))
    assert result.returncode == 0, result.stderr
    steps = [(s["action"], s.get("cause"), s["url"]) for s in json.loads(out.read_text())["steps"]]
    assert steps == [("navigate", "goto", "http://spa.test/"), ("click", None, "http://spa.test/"),
                     ("navigate", "sameDocument", "http://spa.test/guide/queues.html")], steps


# A page that opens its search box on a keyboard shortcut, as VitePress does ('/', Ctrl+K): a
# listener on `window` for keys pressed outside any field.
SHORTCUT_PAGE = b"""<!doctype html><html><head><title>Docs</title><script>
window.addEventListener('keydown', (e) => {
  const t = e.target;
  if (t.tagName === 'INPUT' || document.getElementById('q')) return;
  if (e.key === '/' || (e.ctrlKey && e.key === 'k')) {
    e.preventDefault();
    const box = document.createElement('input');
    box.id = 'q'; box.type = 'search'; box.setAttribute('aria-label', 'Search docs');
    const hit = document.createElement('p');
    box.addEventListener('input', () => { hit.textContent = box.value === 'graveyard' ? 'Dead letters go to graveyard.' : ''; });
    document.body.append(box, hit);
    box.focus();
  }
});
</script></head><body><h1>Docs</h1><p>Press / to search.</p></body></html>"""

SHORTCUT_SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.keyboard.press("Shift")  # a modifier alone is no step
    page.keyboard.press("/")
    box = page.get_by_role("searchbox", name="Search docs")
    box.press_sequentially("graveyard")
    hit = page.get_by_text("Dead letters go to graveyard.")
    hit.wait_for()
    record_answer(page, "graveyard", locator=hit)
'''


def test_a_keyboard_shortcut_is_a_press_step_the_reference_replays(tmp_path, cli, record_scripted):
    """A key pressed outside any field is the person's step (a `press` with no target), and the
    session replays on its own archive: before, the '/' was not logged, and the task expired at
    once ("no searchbox 'Search docs' on this page")."""
    result, archive, out = record_scripted(SHORTCUT_PAGE, SHORTCUT_SCRIPT, host="keys.test")
    assert result.returncode == 0, result.stderr
    steps = [(s["action"], s["target"] and s["target"]["name"], s["value"] if s["action"] != "answer" else None)
             for s in json.loads(out.read_text())["steps"]]
    assert steps == [("navigate", None, None), ("press", None, "/"), ("type", "Search docs", "graveyard"),
                     ("answer", "", None)], steps
    suite = tmp_path / "suite"
    result = cli("tasks", "add", suite, "--reference", out, "--archive", archive,
                 "--answer", "graveyard", "--id", "shortcut", "--instruction", "Search the docs for the dead letters.")
    assert result.returncode == 0, result.stderr
    result = cli("tasks", "validate", suite, "--backend", "browser", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 of 1 tasks reachable on the archive, 0 expired (browser backend)" in result.stderr


def _one_page_site(page: bytes, *, paths=("/",), answers: dict | None = None):
    """A loopback site answering a GET of each of ``paths`` with the HTML ``page`` (404 elsewhere)
    and each method of ``answers`` with its function's ``(status, body, content type)`` (it is given
    the request handler), serving in a thread: the caller shuts it down."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            found = self.path in paths
            self._send(200 if found else 404, page if found else b"not found", "text/html; charset=utf-8")

        def _other(self):
            self._send(*answers[self.command](self))

        def _send(self, status, body, ctype):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    for method in answers or {}:
        setattr(Handler, f"do_{method}", Handler._other)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


EDITOR_PAGE = b"""<!doctype html><html><head><title>Edit</title></head><body>
<form method="post" action="/save"><div class="editor"><div class="rich" contenteditable="true" role="textbox"
aria-multiline="true"><div data-block="a">The lab opens at ten.</div></div></div>
<input type="hidden" name="body"><button type="submit">Publish</button></form>
<script>
const ed = document.querySelector('.rich');
ed.addEventListener('input', () => { document.querySelector('input[name=body]').value = ed.innerText; });
</script></body></html>"""

EDITOR_SCRIPT = '''
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.locator(".rich").click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.type("Tours at 11.")
'''


def test_typing_into_a_rich_text_editor_logs_its_text(record_scripted):
    """A rich text editor is a ``contenteditable`` element, not a field (Wagtail's Draftail, any
    Draft.js or ProseMirror editor): what the person typed into it is logged as the editor's text,
    as a field's value is; it was logged as ``null``, which the reference agent replayed as
    ``fill(bid, '')``, emptying the editor before the page was published."""
    result, _, out = record_scripted(EDITOR_PAGE, EDITOR_SCRIPT, host="editor.test")
    assert result.returncode == 0, result.stderr
    typed = [s for s in json.loads(out.read_text())["steps"] if s["action"] == "type"]
    assert len(typed) == 1, typed
    assert typed[0]["target"]["role"] == "textbox" and typed[0]["keys"] is True
    assert typed[0]["value"] == "The lab opens at ten.\nTours at 11.", typed[0]


# A field inside a custom element's shadow root (Shoelace's <sl-input>, any web component): at the
# window, a key's target is the host, not the field.
SHADOW_PAGE = b"""<!doctype html><html><head><title>Form</title></head><body><x-field></x-field>
<script>
customElements.define('x-field', class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<label>Name <input aria-label="Name"></label>';
  }
});
</script></body></html>"""


def test_keys_typed_into_a_field_in_a_shadow_root_are_no_press_steps(record_scripted):
    result, _, out = record_scripted(SHADOW_PAGE, f"""
def run(page):
    {FIRST_PAINT}
    page.get_by_label("Name").click()
    page.keyboard.type("ab")
""", host="shadow.test")
    assert result.returncode == 0, result.stderr
    steps = [s["action"] for s in json.loads(out.read_text())["steps"]]
    assert "press" not in steps, steps


def test_text_typed_into_a_rich_text_editor_is_no_evidence(record_scripted):
    # the person's own words in an editor are not the site's: record_answer refuses them as evidence
    result, _, _ = record_scripted(EDITOR_PAGE, EDITOR_SCRIPT + '''
    from webfreeze.recorder.session import record_answer
    record_answer(page, "11", evidence=["Tours at 11."])
''', host="editor.test")
    assert result.returncode != 0
    assert "does not show the evidence 'Tours at 11.'" in result.stderr, result.stderr


# A form with a field named "id" (I Hate Money's login form, any form of a project id or a record id):
# the form's `id` property is that field (the DOM's named access to a form's controls), not the form's id
# attribute. The recorder's CSS path read the property and logged every target in the form as
# `#\[object\ HTMLInputElement\] > ...`, a path no observation has: two nameless buttons in it could not
# be told apart by the reference agent.
CLOBBERED_FORM_PAGE = b"""<!doctype html><html><head><title>Login</title></head><body>
<form method="get" action="/go"><input name="id" aria-label="Project"><input name="name" aria-label="Name">
<button type="button" onclick="document.title='first'"><svg width="10" height="10"></svg></button>
<button type="button" onclick="document.title='second'"><svg width="10" height="10"></svg></button>
</form></body></html>"""


def test_a_target_in_a_form_with_a_field_named_id_has_its_css_path(record_scripted):
    from webfreeze.simulator.axtree import build_tree

    result, _, out = record_scripted(CLOBBERED_FORM_PAGE, f"""
def run(page):
    {FIRST_PAINT}
    page.locator("button").nth(1).click()
    page.wait_for_function("document.title === 'second'")
""", host="form.test")
    assert result.returncode == 0, result.stderr
    clicks = [s for s in json.loads(out.read_text())["steps"] if s["action"] == "click"]
    assert len(clicks) == 1, clicks
    css = clicks[0]["target"]["css"]
    # the observation's path of the second button, the one the person clicked
    tree = build_tree(CLOBBERED_FORM_PAGE, "http://form.test/")
    buttons = [e for e in tree.summaries() if e["role"] == "button"]
    assert len(buttons) == 2 and buttons[0]["css"] != buttons[1]["css"], buttons
    assert css == buttons[1]["css"], (css, buttons)


# A login form whose password field nothing names a password: I Hate Money labels it "Private code";
# here its id and name say "code" too. Only its type says what it holds.
CODE_LOGIN_PAGE = b"""<!doctype html><html><head><title>Log in</title></head><body>
<form method="get" action="/"><label for="project">Project identifier</label><input id="project" name="project">
<label for="code">Private code</label><input id="code" name="code" type="password">
<button type="button">Log in</button></form></body></html>"""


def test_a_value_typed_into_a_password_field_is_redacted_whatever_its_name(record_scripted):
    """The recorder did not note a field's type, so `--redact` knew a typed password only by a name or
    CSS path that says password / pwd / PIN / secret: a "Private code" field (`#code`) kept its value
    in the trajectory and the archive's documents of a bundle shared as redacted."""
    from secret_search import everything, holds

    result, archive, out = record_scripted(CODE_LOGIN_PAGE, f"""
def run(page):
    {FIRST_PAINT}
    page.get_by_label("Project identifier").fill("skitrip")
    page.get_by_label("Private code").fill("k7-ski-trip-code")
""", "--redact", host="login.test")
    assert result.returncode == 0, result.stderr
    typed = [s for s in json.loads(out.read_text())["steps"] if s["action"] == "type"]
    assert [s["target"]["name"] for s in typed] == ["Project identifier", "Private code"], typed
    assert typed[0]["value"] == "skitrip"  # (not a password: kept)
    assert "k7-ski-trip-code" not in out.read_text(), typed[1]
    assert not holds(everything(archive), "k7-ski-trip-code")


SEARCH_FORM = b"""<!doctype html><html><head><title>Search</title></head><body>
<form method="post" action="/search"><label for="types">Content</label>
<select id="types" name="search_types" multiple required><option value="post">Post</option>
<option value="topic">Topic</option><option value="forum">Forum</option></select>
<label for="q">Criteria</label><input id="q" name="search_query" required>
<input type="submit" value="Search"></form></body></html>"""

MULTIPLE_SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_label("Content").select_option(["post", "topic"])
    page.get_by_label("Criteria").fill("grounds")
    page.get_by_role("button", name="Search").click()
    hit = page.get_by_text("2 posts and 1 topic")
    hit.wait_for()
    record_answer(page, "2 posts and 1 topic", locator=hit)
'''


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_options_chosen_together_in_a_multiple_select_are_one_step_that_replays(tmp_path, cli, record_scripted,
                                                                                   backend):
    """FlaskBB's search asks which kinds of content to search in a <select multiple>: a person who
    chose Post and Topic was logged as having chosen Post alone, so the reference posted another
    form and the task read as an incomplete capture. The step keeps every option chosen
    (``values``, ``labels``) and the reference agent chooses them all."""
    def found(handler):
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        ok = body == b"search_types=post&search_types=topic&search_query=grounds"
        return (200, b"<!doctype html><title>Results</title><p>2 posts and 1 topic</p>" if ok else b"wrong form",
                "text/html; charset=utf-8")

    result, archive, out = record_scripted(SEARCH_FORM, MULTIPLE_SCRIPT, host="forum.test", answers={"POST": found})
    assert result.returncode == 0, result.stderr
    (select,) = [s for s in json.loads(out.read_text())["steps"] if s["action"] == "select"]
    assert select["value"] == {"value": "post", "label": "Post", "values": ["post", "topic"],
                               "labels": ["Post", "Topic"]}
    suite = tmp_path / "suite"
    result = cli("tasks", "add", suite, "--reference", out, "--archive", archive, "--answer", "2 posts and 1 topic",
                 "--id", "both", "--instruction", "Search posts and topics for grounds.")
    assert result.returncode == 0, result.stderr
    result = cli("tasks", "validate", suite, "--backend", backend, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"1 of 1 tasks reachable on the archive, 0 expired ({backend} backend)" in result.stderr


# MoinMoin 2's edit page: the visible OK button (outside the form) clicks the form's hidden submit
HIDDEN_SUBMIT_PAGE = b"""<!doctype html><title>Modify</title>
<button onclick="document.getElementById('save').click()">OK</button>
<form method="post" action="/save"><textarea name="text">body</textarea>
<input type="submit" id="save" value="OK" style="display: none"></form>"""


def test_a_script_that_times_out_on_a_click_names_its_line_the_locator_and_why(record_scripted):
    """A click that times out is one line naming the script's line, the locator and Playwright's
    last reason (here: the element is not visible), not only Playwright's first line ("Timeout
    30000ms exceeded."), which says nothing of which of the script's clicks failed."""
    script = f"def run(page):\n    {FIRST_PAINT}\n\n    page.locator('#save').click(timeout=1500)\n"
    result, archive, out = record_scripted(HIDDEN_SUBMIT_PAGE, script, host="moin.test")
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "the session script failed at moin.py:4: TimeoutError: Locator.click: Timeout 1500ms exceeded" in line, line
    assert 'waiting for locator("#save")' in line and "element is not visible" in line, line
    assert not out.exists()


CODE_FORM_PAGE = CODE_LOGIN_PAGE.replace(b'<button type="button">', b'<button type="submit">')


def test_a_failing_script_still_redacts_what_it_recorded(record_scripted):
    """`--redact` ran only after a session that succeeded: a script that signed in and then failed
    (a MoinMoin edit whose click timed out) left the password it typed, in the form's request, and
    the session's cookies in the archive, which the error said it kept, though --redact was given."""
    from secret_search import everything, holds

    result, archive, out = record_scripted(CODE_FORM_PAGE, f"""
def run(page):
    {FIRST_PAINT}
    page.get_by_label("Project identifier").fill("skitrip")
    page.get_by_label("Private code").fill("k7-ski-trip-code")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**code=**")
    raise RuntimeError("not the page I expected")
""", "--redact", host="login.test")
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "RuntimeError: not the page I expected" in line and "redacted" in line, line
    assert not out.exists()
    chunks = everything(archive)
    assert holds(chunks, "skitrip")  # the request was recorded: only the secret in it is gone
    assert not holds(chunks, "k7-ski-trip-code")
