"""Crawls that check themselves (issue 31): chained CSS imports, a stylesheet whose first answer is
cut off, one that never comes, ``--max-pages``, ``--recheck``, HSTS-preloaded names, WebP page
screenshots. The site is a real HTTP server on loopback whose stylesheets import each other four
levels deep, each level answered after a delay."""

from __future__ import annotations

import io
import json
import os
import shlex
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

LEVELS = 4
DELAY_S = 0.2  # per @import level: the chain takes a second to arrive
HOLD_S = 3.0  # how long a held answer waits (ChainSite's hold_once)

PAGES = {
    "/": b"""<!doctype html><html><head><title>Chained imports</title>
<link rel="stylesheet" href="/css/l1.css"></head>
<body><h1>Chained imports</h1><p class="body">Styled four levels deep.</p><a href="/two.html">two</a></body></html>""",
    "/two.html": b"""<!doctype html><html><head><title>Two</title>
<link rel="stylesheet" href="/css/l1.css"></head><body><h1>Two</h1><a href="/">home</a></body></html>""",
}


def stylesheet(level: int) -> bytes:
    head = f'@import "/css/l{level + 1}.css";\n' if level < LEVELS else ""
    # each level paints something of its own, so a level missing in replay shows in the screenshot
    return (head + f"h{level % 2 + 1} {{ color: rgb({level * 60}, 20, 20); }}\n"
            f"body {{ margin-left: {level * 10}px; }}\n").encode()


class ChainSite:
    """The test site. ``cut_once``: paths whose first answer is cut off mid-body (the connection
    closes early); ``cut_always``: paths never answered whole; ``drop_on``: path -> the requests of
    it (1 the first) whose connection closes with no answer; ``hold_once``: paths whose first
    answer comes only after HOLD_S."""

    def __init__(self, cut_once=(), cut_always=(), pages=None, drop_once=(), drop=(), redirects=None, drop_on=None,
                 hold_once=()):
        self.cut_once, self.cut_always, self.drop_once = set(cut_once), set(cut_always), set(drop_once)
        self.hold_once = set(hold_once)
        self.drop = set(drop)
        self.drop_on = {path: set(hits) for path, hits in (drop_on or {}).items()}
        self.redirects = dict(redirects or {})  # path -> where a 302 sends it
        self.pages = {**PAGES, **(pages or {})}
        self.hits: dict[str, int] = {}
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                with site.lock:
                    n = site.hits[path] = site.hits.get(path, 0) + 1
                if path in site.redirects:
                    self.send_response(302)
                    self.send_header("Location", site.redirects[path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if path in site.drop or (path in site.drop_once and n == 1) or n in site.drop_on.get(path, ()):
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if path in site.hold_once and n == 1:
                    time.sleep(HOLD_S)
                if path in site.pages:
                    body = site.pages[path]
                    ctype = {"pdf": "application/pdf", "json": "application/json"}.get(
                        path.rsplit(".", 1)[-1], "text/html; charset=utf-8")
                elif path.startswith("/css/l") and path[6:-4].isdigit():
                    time.sleep(DELAY_S)
                    body, ctype = stylesheet(int(path[6:-4])), "text/css"
                else:
                    body, ctype = b"not found", "text/plain"
                    self.send_response(404)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if path in site.cut_always or (path in site.cut_once and n == 1):
                    self.wfile.write(body[:5])  # then the connection drops: the body never arrives whole
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                try:
                    self.wfile.write(body)
                except OSError:  # (a held answer whose client has gone)
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _css_statuses(archive) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    with Archive.open(archive) as arc:
        for ex in arc.exchanges():
            if "/css/" in ex.url:
                out.setdefault(ex.url.rsplit("/", 1)[1], []).append(ex.status)
    return out


def _replay_check(cli, archive, report):
    r = cli("replay", "check", archive, "--report", report, timeout=300)
    return r, json.loads((report / "report.json").read_text()) if (report / "report.json").exists() else None


def test_cut_stylesheet_is_fetched_again_and_replays_whole(tmp_path, home, cli):
    """The third of four chained @imports is cut off the first time: the crawl's check misses it,
    fetches it live, and the archive replays with 0 misses and the captured pixels."""
    site = ChainSite(cut_once={"/css/l3.css"})
    archive = tmp_path / "chain.wfz"
    try:
        # one page: no later page asks for the stylesheets again and records them by chance
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "0", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(complete)" in r.stdout, r.stdout
    # cut once, then fetched again by the crawl's check, and once more as the page is captured again
    assert site.hits["/css/l3.css"] == 3
    statuses = _css_statuses(archive)
    assert all(200 in statuses.get(f"l{n}.css", []) for n in range(1, LEVELS + 1)), statuses
    with Archive.open(archive) as arc:
        pages = list(arc.pages())
        assert len(pages) == 1 and pages[0].extra["complete"] is True
        shot = pages[0].screenshot()
        assert shot[:4] == b"RIFF" and shot[8:12] == b"WEBP"  # lossless WebP page screenshots
    r, report = _replay_check(cli, archive, tmp_path / "report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["summary"]["missed_requests"] == 0
    for page in report["pages"]:
        assert page["pixel_difference"] == 0.0 and page["text_similarity"] == 1.0, page


def test_dropped_connection_placeholder_is_repaired_within_the_crawl(tmp_path, home, cli):
    """The second stylesheet's first connection closes with no answer: the archive holds the
    proxy's placeholder 502 for it, and nothing of the two levels it imports. The check counts it as
    missing and fetches it again, then the levels that uncovers, one check each; then the page is
    captured again (its first screenshot showed it without them), and replays with the real
    stylesheets, pixel for pixel."""
    site = ChainSite(drop_once={"/css/l2.css"})
    archive = tmp_path / "dropped.wfz"
    _crawl_is_complete_and_replays_whole(cli, site, archive, tmp_path / "report")
    statuses = _css_statuses(archive)
    assert 502 in statuses["l2.css"] and 200 in statuses["l2.css"]
    assert 200 in statuses["l3.css"] and 200 in statuses["l4.css"]


def _crawl_is_complete_and_replays_whole(cli, site, archive, report_dir) -> None:
    """Crawl the site's start page alone (the site stopped after): complete, and `replay check` finds
    no miss, no request that failed at capture and the captured pixels."""
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "0", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0 and "(complete)" in r.stdout, r.stdout + r.stderr
    r, report = _replay_check(cli, archive, report_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["summary"]["missed_requests"] == 0 and report["summary"]["requests_failed_at_capture"] == 0
    assert report["pages"][0]["pixel_difference"] == 0.0


def test_a_page_captured_again_that_drops_the_stylesheet_again_is_captured_once_more(tmp_path, home, cli):
    """The stylesheet's connection closes unanswered on the page's load, and again on its load as it
    is captured again after the check's live fetch repaired it (the check's fetches get it whole).
    The capture kept must be one whose own load got it: replayed as at its load, as `replay check`
    does, the page misses nothing. (Once, the second capture's drop was repaired by a live fetch
    only, the crawl called the page complete, and `replay check`, replaying as at that capture's
    load, got the placeholder 502: a Datasette script, in a run of the test bed.)"""
    site = ChainSite(drop_on={"/css/l2.css": {1, 3}})
    _crawl_is_complete_and_replays_whole(cli, site, tmp_path / "dropped-twice.wfz", tmp_path / "report")
    assert site.hits["/css/l2.css"] == 5  # dropped, fetched, dropped, fetched, loaded by the third capture


def test_a_request_the_page_itself_gave_up_on_is_not_kept_as_a_failure(tmp_path, home, cli):
    """The page asks for a resource and aborts the request before the answer comes (as a page's
    script drops an image it asked for): the site never failed, so the archive keeps no 502 for it
    (a replay would give that to a page that waits for the answer); the check fetches it, and the
    page is complete and replays whole: `replay check`, where the page aborts the fetch after the
    archive's answer came (it never reads the body), counts no miss for it, as the crawl's check
    does not. (A crawl of Python's documentation on nginx once kept such a 502 for
    `_static/minus.png` on every capture of `py-modindex.html`.)"""
    page = b"""<!doctype html><html><head><title>Gives up</title></head><body><h1>Gives up</h1>
<script>const c = new AbortController(); fetch('/held.txt', {signal: c.signal}).catch(() => {});
setTimeout(() => c.abort(), 300);</script></body></html>"""
    site = ChainSite(pages={"/": page, "/held.txt": b"held"}, hold_once={"/held.txt"})
    archive = tmp_path / "gives-up.wfz"
    _crawl_is_complete_and_replays_whole(cli, site, archive, tmp_path / "report")
    with Archive.open(archive) as arc:
        held = [ex.status for ex in arc.exchanges() if ex.url.endswith("/held.txt")]
    assert held and set(held) == {200}, held  # the check's fetch and the capture's own answers, none a 502
    assert site.hits["/held.txt"] >= 2


def test_resource_that_never_arrives_marks_the_page_incomplete(tmp_path, home, cli):
    site = ChainSite(cut_always={"/css/l3.css"})
    archive = tmp_path / "broken.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "0", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 3, r.stdout + r.stderr  # incomplete (docs/recording.md, the exit status)
    assert "(complete)" not in r.stdout and "incomplete" in r.stdout
    assert f"incomplete: {site.url}/ (missing: {site.url}/css/l3.css" in r.stdout
    assert "--recheck" in r.stderr and r.stderr.count("\n") == 1
    with Archive.open(archive) as arc:
        (page,) = list(arc.pages())  # recorded all the same, marked
        assert page.extra["complete"] is False
        assert any(m.startswith(f"{site.url}/css/l3.css") for m in page.extra["missing"])
        (state,) = [d.body() for d in arc.documents(prefix="crawls/")]
        assert [u for u, _ in state["incomplete"]] == [f"{site.url}/"]


def test_upstream_failure_is_missing_to_the_crawl_and_listed_by_replay_check(tmp_path, home, cli):
    """A stylesheet on a port where nothing listens: the proxy records its placeholder 502 (the
    site never answered). The crawl counts it as missing, tries it again, and marks the page;
    ``replay check`` lists it as failed at capture."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens once the socket is closed
    page = (f'<!doctype html><html><head><title>Dead</title><link rel="stylesheet" '
            f'href="http://127.0.0.1:{dead}/gone.css"></head><body><h1>Dead link</h1></body></html>').encode()
    site = ChainSite(pages={"/dead.html": page})
    archive = tmp_path / "dead.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/dead.html", "--archive", archive, "--depth", "0", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 3, r.stdout + r.stderr
    gone = f"http://127.0.0.1:{dead}/gone.css"
    assert f"(missing: {gone} (" in r.stdout, r.stdout
    with Archive.open(archive) as arc:
        tries = [e for e in arc.exchanges(url=gone)]
        # captured once, fetched again once: the second check missed the same, so the crawl gave up
        assert len(tries) == 2 and all(e.status == 502 and e.extra.get("error") for e in tries)
    r, report = _replay_check(cli, archive, tmp_path / "report")
    assert report["pages"][0]["failed_at_capture"] == [gone]
    assert report["summary"]["requests_failed_at_capture"] == 1
    assert report["pages"][0]["misses"] == []  # (replayed as captured: Chromium fails it, as it did then)
    assert r.returncode == 0, r.stdout + r.stderr


# A one-page PDF with a line of text.
PDF = b"""%PDF-1.4
1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj
2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj
3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>>>>>endobj
4 0 obj<</Length 44>>stream
BT /F1 24 Tf 20 100 Td (Hello PDF) Tj ET
endstream endobj
5 0 obj<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>endobj
trailer<</Root 1 0 R>>
%%EOF
"""


def test_a_pdf_page_is_complete_and_replay_check_loads_it(tmp_path, home, cli):
    """The crawl runs the headless shell, which takes a PDF for a download: the full browser shows
    it in its viewer (whose own chrome:// and chrome-extension:// resources are not the site's),
    and the crawl is complete. ``replay check`` loads that page in the full browser too, with no
    miss and no error. Each page record names the Chromium that captured it; a JSON document the
    shell captured is replayed in the shell (like with like), with the same pixels."""
    paper = (b'<!doctype html><html><head><title>Paper</title></head><body><a href="/doc.pdf">the paper</a>'
             b' <a href="/data.json">its data</a></body></html>')
    site = ChainSite(pages={"/paper.html": paper, "/doc.pdf": PDF, "/data.json": b'{"table": [1, 2, 3]}'})
    archive = tmp_path / "pdf.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/paper.html", "--archive", archive, "--depth", "1", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0 and "3 pages in total (complete)" in r.stdout, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        used = {p.url.rsplit("/", 1)[1]: p.extra["browser"] for p in arc.pages()}
    shell = os.path.basename(chromium_path(shell=True))
    assert used == {"paper.html": shell, "data.json": shell, "doc.pdf": os.path.basename(chromium_path())}, used
    r, report = _replay_check(cli, archive, tmp_path / "report")
    assert r.returncode == 0, r.stdout + r.stderr
    pages = {p["url"].rsplit("/", 1)[1]: p for p in report["pages"]}
    assert sorted(pages) == ["data.json", "doc.pdf", "paper.html"]
    assert all(p["error"] is None and p["misses"] == [] for p in pages.values()), pages
    assert pages["paper.html"]["text_similarity"] == 1.0
    assert pages["data.json"]["pixel_difference"] == 0.0, pages["data.json"]


def test_crawl_cut_by_max_pages_is_not_complete(tmp_path, home, cli):
    site = ChainSite()
    archive = tmp_path / "cut.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "1", "--max-pages", "1",
                timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "(complete)" not in r.stdout and "stopped at --max-pages with 1 URLs queued" in r.stdout
        # the same crawl with room for the rest goes on and completes
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "1", "--max-pages", "5",
                timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0 and "resumed" in r.stdout and "(complete)" in r.stdout, r.stdout


def test_a_page_that_did_not_load_leaves_the_crawl_incomplete(tmp_path, home, cli):
    """A page the site never answered was not captured: the crawl lists it and does not call
    itself complete (a page the site answered with an error status is what the site gave)."""
    site = ChainSite(drop={"/two.html"})
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", tmp_path / "drop.wfz", "--depth", "1", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"failed: {site.url}/two.html" in r.stdout
    assert "(complete)" not in r.stdout and "incomplete: 1 page did not load" in r.stdout, r.stdout


def test_recheck_repairs_an_archive_that_misses_a_stylesheet(tmp_path, home, cli):
    """Crawled unchecked while the stylesheet's first answer is cut off: the archive misses it and
    ``replay check`` says so; ``--recheck`` fetches it, and the check passes."""
    site = ChainSite(cut_once={"/css/l3.css"})
    archive = tmp_path / "damaged.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "0", "--no-check", timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "200" not in str(_css_statuses(archive).get("l3.css", []))
        r, report = _replay_check(cli, archive, tmp_path / "before")
        assert r.returncode == 1 and report["summary"]["missed_requests"] >= 1
        assert f"{site.url}/css/l3.css" in report["pages"][0]["misses"]
        pages_before = sum(site.hits.get(p, 0) for p in PAGES)
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "0", "--recheck", timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "1 page rechecked" in r.stdout and "0 still incomplete" in r.stdout
        assert sum(site.hits.get(p, 0) for p in PAGES) == pages_before  # no page visited live
    finally:
        site.stop()
    r, report = _replay_check(cli, archive, tmp_path / "after")
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["summary"]["missed_requests"] == 0
    with Archive.open(archive) as arc:
        (state,) = [d.body() for d in arc.documents(prefix="crawls/")]
        assert state["incomplete"] == []


def test_the_suggested_recheck_runs_as_printed(tmp_path, home, cli):
    """A crawl under a name of its own (``--resolve``, ``--depth 0``) that ends incomplete suggests
    a ``--recheck`` with the crawl's own options: run as printed once the site answers whole, it
    repairs the archive and the crawl's state (without ``--resolve`` it could not reach the site;
    without ``--depth 0`` it would update another crawl's state)."""
    site = ChainSite(cut_always={"/css/l3.css"})
    archive = tmp_path / "named archive.wfz"
    try:
        r = cli("record", "crawl", "http://chain.test/", "--archive", archive, "--depth", "0",
                "--resolve", f"chain.test=127.0.0.1:{site.port}", "--redact", "--param", "ticket", timeout=300)
        assert r.returncode == 3, r.stdout + r.stderr
        assert r.stderr.count("\n") == 1 and "repair with: webfreeze " in r.stderr, r.stderr
        printed = shlex.split(r.stderr.split("repair with: ", 1)[1])
        assert printed[:3] == ["webfreeze", "record", "crawl"], printed
        # what the repair fetches is redacted as the crawl was
        assert "--redact" in printed and printed[printed.index("--param") + 1] == "ticket", printed
        site.cut_always.clear()  # the site answers whole now
        r = cli(*printed[1:], timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 page rechecked" in r.stdout and "0 still incomplete" in r.stdout, r.stdout
    with Archive.open(archive) as arc:
        (state,) = [d.body() for d in arc.documents(prefix="crawls/")]
        assert state["incomplete"] == []
    # archive info goes by the recheck, not by the page record's flag from capture time (which it
    # kept: "incomplete 1 page ... their replays will miss them too", after the repair)
    info = cli("archive", "info", archive, "--json")
    assert json.loads(info.stdout)["incomplete_pages"] == [], info.stdout
    assert "incomplete" not in cli("archive", "info", archive).stdout


def test_hsts_preloaded_name_over_plain_http_is_one_line(tmp_path, home, cli):
    """docs.python.org is on Chromium's built-in HSTS preload list: asked for over http://, Chromium
    goes to https:// itself, and the plain-HTTP server behind --resolve cannot answer TLS."""
    site = ChainSite()
    archive = tmp_path / "hsts.wfz"
    try:
        r = cli("record", "crawl", "http://docs.python.org/", "--archive", archive, "--depth", "0",
                "--resolve", f"docs.python.org=127.0.0.1:{site.port}", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "docs.python.org is HSTS-preloaded" in r.stderr and "serve it over TLS" in r.stderr, r.stderr
    assert not archive.exists()


@pytest.mark.parametrize("where", ["elsewhere", "missing"])
def test_a_start_page_that_redirects_to_a_failure_names_where_it_led(tmp_path, home, cli, where):
    """The start page redirects: to a name nothing resolves (the proxy's 502), or to a page of the
    site that answers 404. The one line names the URL that failed, and for the name, that
    --resolve does not name it."""
    target = "http://elsewhere.test/login" if where == "elsewhere" else "/gone.html"
    site = ChainSite(redirects={"/": target})
    archive = tmp_path / "redirect.wfz"
    try:
        r = cli("record", "crawl", "http://app.test/", "--archive", archive, "--depth", "0",
                "--resolve", f"app.test=127.0.0.1:{site.port}", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stdout + r.stderr
    if where == "elsewhere":
        assert "the start page failed (it redirected to http://elsewhere.test/login, which did not load: " in r.stderr
        assert r.stderr.rstrip().endswith("; --resolve names app.test, not elsewhere.test)"), r.stderr
    else:
        assert "the start page failed (it redirected to http://app.test/gone.html, which answered HTTP 404)" \
            in r.stderr, r.stderr


def test_a_start_url_without_its_slash_is_no_redirect():
    """``http://app.test`` lands on ``http://app.test/``, the same page: a failure there is said as
    it is, never as a redirect."""
    from webfreeze.recorder.crawl import redirect_failure

    class NoHint:  # (the proxy is asked for a --resolve hint only when the failure is elsewhere)
        def resolve_hint(self, url):
            return "; hint"

    assert redirect_failure("http://app.test", "http://app.test/", "HTTP 403", NoHint()) == "HTTP 403"
    assert redirect_failure("http://app.test/a", "http://app.test/a#top", "HTTP 403", NoHint()) == "HTTP 403"
    assert redirect_failure("http://app.test/", "http://b.test/", "did not load: x", NoHint()) == \
        "it redirected to http://b.test/, which did not load: x; hint"


def test_webp_and_png_page_records_compare_exactly(tmp_path):
    """Pixel comparison decodes both sides: the same pixels as PNG and as lossless WebP differ by
    0, and one changed pixel is counted exactly."""
    from PIL import Image

    from webfreeze.checks.replay_check import pixel_difference
    from webfreeze.recorder.crawl import compact_screenshot

    img = Image.new("RGB", (64, 32), (250, 250, 250))
    for x in range(64):
        img.putpixel((x, x % 32), (x * 4, 0, 255 - x * 4))
    png = io.BytesIO()
    img.save(png, "PNG")
    png = png.getvalue()
    webp = compact_screenshot(png)
    assert webp[:4] == b"RIFF" and webp[8:12] == b"WEBP"
    assert pixel_difference(png, webp) == 0.0
    img.putpixel((5, 5), (0, 0, 1))
    other = io.BytesIO()
    img.save(other, "PNG")
    assert pixel_difference(compact_screenshot(other.getvalue()), png) == round(1 / (64 * 32), 6)


def test_old_png_page_record_still_checks_clean(tmp_path, home, cli):
    """An archive whose page record holds a PNG screenshot (as before WebP) replays and compares
    with pixel difference 0: built from a crawled archive, its screenshot re-encoded as PNG."""
    from PIL import Image

    from webfreeze.archives import new_archive_atomically

    site = ChainSite()
    crawled = tmp_path / "webp.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", crawled, "--depth", "0", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    old = tmp_path / "png.wfz"
    with new_archive_atomically(old):
        pass
    with Archive.open(crawled) as src, Archive.open(old, write=True) as dst:
        session = dst.new_session("crawl", source="test", tool="test")
        for ex in src.exchanges():
            dst.add_exchange(ex.to_exchange(session_id=session))
        for p in src.pages():
            png = io.BytesIO()
            Image.open(io.BytesIO(p.screenshot())).save(png, "PNG")
            dst.add_page(session_id=session, url=p.url, captured_at=p.captured_at, title=p.title,
                         screenshot=png.getvalue(), dom=p.dom(), extra=p.extra)
    with Archive.open(old) as arc:
        assert next(arc.pages()).screenshot().startswith(b"\x89PNG")
    r, report = _replay_check(cli, old, tmp_path / "report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["pages"][0]["pixel_difference"] == 0.0


# A single-page application with a hash router, as Docsify's: one document, whose script shows the
# page its fragment names (``#/species``), fetched as a part; ``/`` moves itself to ``#/``.
SPA = b"""<!doctype html><html><head><title>Handbook</title></head><body>
<nav><a href="#/">Home</a> <a href="#/species">Species</a> <a href="#/diet">Diet</a> <a href="#top">top</a></nav>
<div id="app"></div>
<script>
if (!location.hash) history.replaceState(null, '', '#/');
function show() {
  var route = location.hash.slice(2) || 'home';
  fetch('/part/' + route + '.html').then(function (r) { return r.text(); }).then(function (t) {
    document.getElementById('app').innerHTML = t; document.title = route;
  });
}
window.addEventListener('hashchange', show);
show();
</script></body></html>"""
SPA_PARTS = {"/part/home.html": b"<h1>Welcome</h1>", "/part/species.html": b"<h1>Species</h1><p>Sea otter: 148 cm</p>",
             "/part/diet.html": b"<h1>Diet</h1><p>15 percent of body weight</p>"}


def test_hash_routes_of_a_single_page_application_are_pages(tmp_path, home, cli):
    """``#/species`` is another page of a hash-routed application (one URL to HTTP): the crawl visits
    each route, records the part it fetches and a page record of it, and replays it whole. An anchor
    (``#top``) stays the page it is in, and ``#/``, where the script moved ``/``, is not visited twice."""
    site = ChainSite(pages={"/spa.html": SPA, **SPA_PARTS})
    archive = tmp_path / "spa.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/spa.html", "--archive", archive, "--depth", "1", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0 and "3 pages in total (complete)" in r.stdout, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        pages = {p.url.removeprefix(site.url): (p.title, p.dom()) for p in arc.pages()}
        assert {ex.url.removeprefix(site.url) for ex in arc.exchanges(prefix=f"{site.url}/part/")} == set(SPA_PARTS)
    assert sorted(pages) == ["/spa.html", "/spa.html#/diet", "/spa.html#/species"]
    assert pages["/spa.html#/species"][0] == "species" and b"Sea otter: 148 cm" in pages["/spa.html#/species"][1]
    assert b"15 percent" in pages["/spa.html#/diet"][1]
    r, report = _replay_check(cli, archive, tmp_path / "report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["summary"]["missed_requests"] == 0 and report["summary"]["min_text_similarity"] == 1.0


# TiddlyWiki's shape: one document whose script shows the tiddler its fragment names (``#Apples``,
# ``#Granny%20Smith``: permalinks, no element has that id), and an anchor that does name one.
WIKI = b"""<!doctype html><html><head><title>Garden Wiki</title></head><body id="top">
<nav></nav><div id="story"></div>
<script>
var tiddlers = {"Fruit": "A list of fruit", "Apples": "Apples grow on trees", "Granny Smith": "Found in 1868"};
document.querySelector('nav').innerHTML = Object.keys(tiddlers).map(function (t) {
  return '<a href="#' + encodeURIComponent(t) + '">' + t + '</a>'; }).join(' ') + ' <a href="#top">top</a>';
function show() {
  var t = decodeURIComponent(location.hash.slice(1)) || 'Fruit';
  document.getElementById('story').textContent = t + ': ' + (tiddlers[t] || 'missing');
}
window.addEventListener('hashchange', show);
show();
</script><section id="host"></section><script>
// a web component's own anchor, in its open shadow root (Panel's header links: #fruit-shop)
document.getElementById('host').attachShadow({mode: 'open'}).innerHTML = '<h2 id="pests">Pests</h2><a href="#pests">pests</a>';
</script></body></html>"""


def test_fragment_links_that_name_no_element_are_said_not_followed(tmp_path, home, cli):
    """A crawl follows a fragment link only when it is a hash route (``#/guide``); TiddlyWiki's
    permalinks (``#Apples``) name no element of the page either, so the crawl recorded its one
    document and said "(complete)" without a word about them, and a start URL's ``#Bananas`` was
    dropped silently. The crawl now names them in a note: routes of a client-side router it does
    not follow, which a recorded session can reach. An anchor whose element exists (``#top``) is
    not named, nor one whose element is in an open shadow root (``#pests``)."""
    site = ChainSite(pages={"/wiki.html": WIKI})
    archive = tmp_path / "wiki.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/wiki.html", "--archive", archive, "--depth", "1", timeout=300)
        start = cli("record", "crawl", f"{site.url}/wiki.html#Apples", "--archive", tmp_path / "start.wfz",
                    "--depth", "0", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0 and "1 page in total (complete)" in r.stdout, r.stdout + r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, r.stderr
    assert (f"3 links name a fragment that is no element of their page ({site.url}/wiki.html#Apples, "
            f"{site.url}/wiki.html#Fruit, {site.url}/wiki.html#Granny%20Smith)") in notes[0], notes
    assert "#top" not in notes[0] and "#pests" not in notes[0]
    assert start.returncode == 0, start.stdout + start.stderr
    assert f"1 links name a fragment that is no element of their page ({site.url}/wiki.html#Apples)" in start.stderr


def test_a_redirect_landing_page_also_linked_is_visited_once(tmp_path, home, cli):
    """``/old`` redirects to ``/two.html``, and the home page links to both: the visit to ``/old``
    captured ``/two.html`` (recorded under ``/old``, its ``final_url`` the landing page), so the
    crawl does not load ``/two.html`` again."""
    pages = {"/": PAGES["/"].replace(b'<a href="/two.html">two</a>', b'<a href="/old">old</a> <a href="/two.html">two</a>')}
    site = ChainSite(pages=pages, redirects={"/old": "/two.html"})
    archive = tmp_path / "landing.wfz"
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "1", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0 and "(complete)" in r.stdout, r.stdout + r.stderr
    # "/old" and "/two.html" once: the capture through "/old"; the check answers "/old" from the
    # archive, and its next hop too (Playwright routes no redirect's next hop: it reaches the check's
    # own replay server, docs/recording.md), where it went to the live site through the recording proxy
    assert site.hits["/old"] == 1 and site.hits["/two.html"] == 1, (site.hits, r.stdout)
    assert r.stdout.startswith("2 pages and"), r.stdout
    from webfreeze.archives import Archive

    with Archive.open(archive) as arc:
        pages = {p.url: p for p in arc.pages()}
    assert sorted(pages) == [f"{site.url}/", f"{site.url}/old"]
    assert pages[f"{site.url}/old"].extra["final_url"] == f"{site.url}/two.html"
