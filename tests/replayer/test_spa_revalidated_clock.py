"""A hash-routed application as MLflow's UI is: one shell document whose script draws the page its
fragment names, served with an ETag and revalidated by every later page of a crawl (a 304 each).
Each page's script reads the clock ("created 56 seconds ago"). The replay of each page must start
the page's clock when the crawl loaded that page, its 304, not when the shell was first fetched:
``replay check`` showed every page the first page's time ("28 seconds ago" for 56), and counted
the words as volatile, so the report said text similarity 1.0 of a page that read otherwise.
(The page here prints the clock itself, in ms: the capture's real clock ran a few ms past the
document's capture time, so its text is checked against the archive's times, not the capture's.)"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.archives import Archive
from webfreeze.archives.timeutil import parse_time
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# The shell writes the clock its script starts with; the router draws the route's links.
SHELL = b"""<!doctype html><html><head><title>Runs</title></head><body>
<p>loaded at <span id="t"></span></p>
<nav><a href="#/experiments/1">Experiment 1</a> <a href="#/experiments/2">Experiment 2</a></nav>
<div id="app"></div>
<script>
document.getElementById('t').textContent = String(Date.now());
document.getElementById('app').textContent = 'route ' + (location.hash || '#/');
</script></body></html>"""
ETAG = '"shell-1"'


class Shell:
    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path != "/":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.headers.get("If-None-Match") == ETAG:  # the browser revalidating its copy
                    self.send_response(304)
                    self.send_header("ETag", ETAG)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(SHELL)))
                self.send_header("ETag", ETAG)
                self.send_header("Cache-Control", "no-cache")  # cached, but revalidated on every load
                self.end_headers()
                self.wfile.write(SHELL)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_each_hash_route_replays_with_the_clock_of_its_own_load(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    shell = Shell()
    archive = tmp_path / "spa.wfz"
    try:
        r = cli("record", "crawl", "http://runs.test/", "--resolve", f"runs.test=127.0.0.1:{shell.port}",
                "--archive", archive, "--depth", "1", timeout=300)
    finally:
        shell.stop()
    assert r.returncode == 0 and "3 pages in total (complete)" in r.stdout, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        loads = sorted((e.captured_at, e.status) for e in arc.exchanges(url="http://runs.test/", method="GET"))
        pages = sorted((p.captured_at, p.url) for p in arc.pages())
    # the shell was fetched once and revalidated by the later pages' loads
    assert [s for _, s in loads][:1] == [200] and 304 in [s for _, s in loads], loads
    # each page was loaded by the last load of the shell before its record
    loaded = {url: max(at for at, _ in loads if at <= rec_at) for rec_at, url in pages}
    assert len(set(loaded.values())) == 3, loaded  # three loads, three clocks
    report_dir = tmp_path / "report"
    r = cli("replay", "check", archive, "--report", report_dir, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((report_dir / "report.json").read_text())
    for page in report["pages"]:
        html = (report_dir / page["dom"]).read_bytes()
        shown = int(re.search(rb'<span id="t">(\d+)</span>', html).group(1))
        want = int(parse_time(loaded[page["url"]]).timestamp() * 1000)
        # the runtime's clock starts at the load and goes 1 ms on per reading
        assert 0 <= shown - want < 50, (page["url"], shown, want, loaded)
