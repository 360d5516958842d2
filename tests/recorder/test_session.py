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


SLOW_PAGE = b"""<!doctype html><title>slow</title><button id=go onclick="fetch('/slow',
{method: 'PROPFIND'}).then(r => document.title = 'got ' + r.status)">Log in</button>"""


def test_a_late_answer_is_recorded_as_the_site_gave_it(tmp_path, monkeypatch, cli):
    """The script returns at once after a click whose request the server answers 1.5 s later (as a
    server delays a failed login on purpose): the session waits for it, so the archive holds the
    site's 401, not the proxy's 502 for a connection the closing browser cut."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self._send(200, SLOW_PAGE, "text/html")

        def do_PROPFIND(self):  # noqa: N802 (the method's name)
            time.sleep(1.5)
            self._send(401, b"wrong password", "text/plain")

        def _send(self, status, body, ctype):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    script = tmp_path / "late.py"
    script.write_text("def run(page):\n    page.wait_for_function(\"performance.getEntriesByName('first-paint')"
                      ".length > 0\")\n    page.click('#go')\n")
    archive = tmp_path / "late.wfz"
    try:
        result = cli("record", "session", "http://late.test/", "--resolve",
                     f"late.test=127.0.0.1:{server.server_address[1]}", "--archive", archive,
                     "--trajectory", tmp_path / "t.json", "--script", script, timeout=300)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    with Archive.open(archive) as arc:
        (answer,) = arc.exchanges(method="PROPFIND")
        assert (answer.url, answer.response.status, answer.body()) == ("http://late.test/slow", 401, b"wrong password")


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


def test_a_typed_hash_route_is_the_persons_goto(tmp_path, monkeypatch, cli):
    """A hash-routed page (Docsify's ``#/faq``): a route typed into the address bar (``page.goto``)
    or reached with the browser's back button is a same-document navigation the browser started,
    logged as ``goto`` and replayed; the route a link of the page leads to is its effect."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = ROUTES_PAGE if self.path == "/" else b"not found"
            self.send_response(200 if self.path == "/" else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = tmp_path / "routes.py"
    script.write_text(ROUTES_SCRIPT)
    out = tmp_path / "routes.json"
    try:
        result = cli("record", "session", "http://routes.test/", "--archive", tmp_path / "routes.wfz",
                     "--trajectory", out, "--script", script,
                     "--resolve", f"routes.test=127.0.0.1:{server.server_address[1]}", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    navs = [(s["cause"], s["url"]) for s in json.loads(out.read_text())["steps"] if s["action"] == "navigate"]
    assert navs == [("goto", "http://routes.test/"), ("goto", "http://routes.test/#/faq"),
                    ("sameDocument", "http://routes.test/#/species"), ("goto", "http://routes.test/#/faq")], navs


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


def test_typing_into_a_rich_text_editor_logs_its_text(tmp_path, monkeypatch, cli):
    """A rich text editor is a ``contenteditable`` element, not a field (Wagtail's Draftail, any
    Draft.js or ProseMirror editor): what the person typed into it is logged as the editor's text,
    as a field's value is; it was logged as ``null``, which the reference agent replayed as
    ``fill(bid, '')``, emptying the editor before the page was published."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = EDITOR_PAGE if self.path == "/" else b"not found"
            self.send_response(200 if self.path == "/" else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = tmp_path / "edit.py"
    script.write_text(EDITOR_SCRIPT)
    out = tmp_path / "edit.json"
    try:
        result = cli("record", "session", "http://editor.test/", "--archive", tmp_path / "edit.wfz",
                     "--trajectory", out, "--script", script,
                     "--resolve", f"editor.test=127.0.0.1:{server.server_address[1]}", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    typed = [s for s in json.loads(out.read_text())["steps"] if s["action"] == "type"]
    assert len(typed) == 1, typed
    assert typed[0]["target"]["role"] == "textbox" and typed[0]["keys"] is True
    assert typed[0]["value"] == "The lab opens at ten.\nTours at 11.", typed[0]
