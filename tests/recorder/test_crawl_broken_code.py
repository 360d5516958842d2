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
