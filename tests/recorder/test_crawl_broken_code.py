"""A crawl says which pages the site served without their own code: a script or style sheet the site
answered with an error.

A VitePress site rebuilt under a running `vitepress preview` (sirv indexes the files at start) serves
the new pages and answers their new hashed `app.<hash>.js` and `theme.<hash>.js` with 404: the pages
come out as unstyled shells with no router and no search. The crawl recorded them as the site gave
them and said "(complete)", which is true of the replay (it answers the same 404s), and nothing
else: the archive of a broken deployment looked like any other. It now lists such pages and says so
in a warning line; the exit status is unchanged (the capture is whole)."""

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

PAGES = {
    "/": b"""<!doctype html><html><head><title>Docs</title><link rel="stylesheet" href="/assets/style.css">
<script type="module" src="/assets/app.new.js"></script></head>
<body><h1>Docs</h1><a href="/guide.html">Guide</a></body></html>""",
    "/guide.html": b"""<!doctype html><html><head><title>Guide</title><link rel="stylesheet" href="/assets/style.css">
</head><body><h1>Guide</h1><img src="/missing.png" alt=""></body></html>""",
    "/assets/style.css": b"h1 { color: #345; }",
}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = PAGES.get(self.path)
        kind = "text/css" if self.path.endswith(".css") else "text/html; charset=utf-8"
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", kind if body is not None else "text/plain")
        body = body if body is not None else b"Not Found"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_page_whose_own_script_the_site_answered_404_is_listed(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = cli("record", "crawl", "http://docs.test/", "--archive", tmp_path / "a.wfz", "--depth", "1",
                "--resolve", f"docs.test=127.0.0.1:{server.server_address[1]}", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stdout + r.stderr  # the replay answers what the site did: complete
    assert "2 pages in total (complete)" in r.stdout, r.stdout
    # the page whose script is gone is named, with the script; an image 404 (the guide's) is not code
    assert "  broken: http://docs.test/ (script http://docs.test/assets/app.new.js answered 404)" in r.stdout, r.stdout
    assert "guide.html" not in "".join(line for line in r.stdout.splitlines() if "broken:" in line)
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "1 page was served without its own scripts or style sheets" in warnings[0], r.stderr
    with Archive.open(tmp_path / "a.wfz") as arc:
        extras = {p.url: p.extra for p in arc.pages()}
        state = [arc.get_document(d) for d in arc.document_names() if d.startswith("crawls/")]
    assert extras["http://docs.test/"]["broken"] == [["script", "http://docs.test/assets/app.new.js", 404]]
    assert "broken" not in extras["http://docs.test/guide.html"]
    assert state[0]["broken"] == [["http://docs.test/", [["script", "http://docs.test/assets/app.new.js", 404]]]]


class FlakySite:
    """A page whose script the site answers 503 the first time and whose style sheet is cut off
    mid-body the first time: the page's check misses the style sheet, fetches it live, and the page
    is captured again, when the script answers 200."""

    def __init__(self):
        self.served: dict[str, int] = {}
        owner = self

        class Flaky(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                n = owner.served[self.path] = owner.served.get(self.path, 0) + 1
                if self.path == "/":
                    body, kind, code = (b'<!doctype html><html><head><title>Docs</title>'
                                        b'<link rel="stylesheet" href="/site.css"><script src="/app.js"></script>'
                                        b'</head><body><h1>Docs</h1></body></html>'), "text/html", 200
                elif self.path == "/app.js":
                    body, kind, code = b"void 0;", "text/javascript", 503 if n == 1 else 200
                elif self.path == "/site.css":
                    css = b"h1 { color: rgb(0, 90, 40); }" * 40
                    if n == 1:  # cut off: the connection closes early
                        self.send_response(200)
                        self.send_header("Content-Type", "text/css")
                        self.send_header("Content-Length", str(len(css)))
                        self.end_headers()
                        self.wfile.write(css[:40])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    body, kind, code = css, "text/css", 200
                else:
                    body, kind, code = b"Not Found", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_page_captured_again_is_listed_by_what_its_new_capture_got(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    site = FlakySite()
    try:
        r = cli("record", "crawl", "http://flaky.test/", "--archive", tmp_path / "a.wfz", "--depth", "0",
                "--resolve", f"flaky.test=127.0.0.1:{site.server.server_address[1]}", timeout=300)
    finally:
        site.server.shutdown()
        site.server.server_close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert site.served.get("/app.js", 0) >= 2 and site.served.get("/site.css", 0) >= 2, site.served  # captured again
    assert "broken:" not in r.stdout and "own scripts or style sheets" not in r.stderr, r.stdout + r.stderr
