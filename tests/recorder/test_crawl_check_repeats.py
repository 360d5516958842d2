"""The crawl's check replays a page as at its own load, as ``replay check`` does. Node-RED's
editor asks ``GET /nodes`` twice, with jQuery's cache-busting ``_=`` (so the replay matches them
canonically, one key): first as JSON (the node list), then as HTML (the node configurations). The
replay answers repeats of a key in recorded order, starting at the capture closest to its time;
the check replayed as of *now*, after the page's load, so both requests got the HTML, the editor
went another way than it had live, and its WebSocket conversation parted from the recording: the
crawl called every editor page incomplete while ``replay check`` passed it. Here the page names a
script after the two answers; replayed out of order it asks for one the site never served, which
the check then fetched live (a 404 recorded into the archive) and the page was captured again."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = b"""<!doctype html><html><head><title>Editor</title></head><body><h1>Flows</h1><script>
function get(accept, done) {
  var x = new XMLHttpRequest();
  x.open('GET', '/nodes?_=' + Date.now());
  x.setRequestHeader('Accept', accept);
  x.onload = function () { done(x.responseText.trim()); };
  x.send();
}
get('application/json', function (list) {
  get('text/html', function (configs) {
    var s = document.createElement('script');
    s.src = '/chunks/' + list + '-' + configs + '.js';
    document.head.appendChild(s);
  });
});
</script></body></html>"""


# and a catalogue on a host this machine cannot reach, asked with its own cache buster (a failed
# fetch records another placeholder, and repairs nothing)
CATALOGUE = b"""<script>fetch('http://catalogue.invalid/catalogue.json?_=' + Date.now()).catch(function () {});</script>"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    page = PAGE

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/":
            status, body, kind = 200, self.page, "text/html; charset=utf-8"
        elif path == "/nodes":  # the answer depends on Accept, as Node-RED's does (its HTML: text here,
            # since the replay puts its runtime in front of an HTML answer, which this page would read)
            html = "text/html" in (self.headers.get("Accept") or "")
            status, body, kind = 200, (b"configs" if html else b"list"), ("text/plain" if html else "application/json")
        elif path == "/chunks/list-configs.js":
            status, body, kind = 200, b"document.title = 'Editor ready';", "text/javascript"
        else:
            status, body, kind = 404, b"not found", "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=[PAGE, PAGE.replace(b"</body>", CATALOGUE + b"</body>")], ids=["editor", "with-catalogue"])
def editor(request):
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Site", (Handler,), {"page": request.param}))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_crawl_checks_a_page_as_at_its_own_load(tmp_path, monkeypatch, cli, editor):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    archive = tmp_path / "editor.wfz"
    r = cli("record", "crawl", "http://editor.test/", "--resolve", f"editor.test=127.0.0.1:{editor}",
            "--archive", archive, "--depth", "0", timeout=300)
    with Archive.open(archive) as arc:
        chunks = sorted(e.url.rsplit("/", 1)[1] for e in arc.exchanges() if "/chunks/" in e.url)
        documents = list(arc.exchanges(url="http://editor.test/"))
        catalogue = [e for e in arc.exchanges() if "catalogue.invalid" in e.url]
    assert chunks == ["list-configs.js"], chunks  # nothing the live page never asked for
    assert len(documents) == 1  # captured once: the check repaired nothing
    if not catalogue:
        assert r.returncode == 0 and "(complete)" in r.stdout, r.stdout + r.stderr
    else:  # incomplete for the catalogue alone: fetched again once, and no check after that fetch
        assert r.returncode == 3 and "(missing: http://catalogue.invalid/catalogue.json?_=" in r.stdout, r.stdout
        assert "editor.test/nodes" not in r.stdout and "/chunks/" not in r.stdout, r.stdout
        assert len(catalogue) == 2 and all(e.status == 502 for e in catalogue), [e.url for e in catalogue]
    r = cli("record", "crawl", "http://editor.test/", "--resolve", f"editor.test=127.0.0.1:{editor}",
            "--archive", archive, "--depth", "0", "--recheck", timeout=300)
    assert r.returncode == (3 if catalogue else 0), r.stdout + r.stderr
    with Archive.open(archive) as arc:
        assert not [e.url for e in arc.exchanges() if "/chunks/" in e.url and "list-configs" not in e.url]
