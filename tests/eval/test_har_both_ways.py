"""HAR both ways. Out: a run exported with ``eval export-har`` replays every page of its episodes in
Playwright's own ``route_from_har(..., not_found="abort")`` with the same text as the replay served.
In: a HAR Playwright records (``record_har_path``) through a replay imports with ``archive import``
and ``replay check``s with no miss; Chromium DevTools' HAR (base64 bodies, HTTP/2 pseudo-headers,
an entry without content) imports too, the entry without content listed, not invented."""

from __future__ import annotations

import base64
import json
import re

import pytest
from cli_runner import run_cli

from webfreeze.archives import Archive
from webfreeze.checks.replay_check import text_similarity
from webfreeze.demo import ARCHIVE, SUITE
from webfreeze.replayer.server import ReplayServer
from webfreeze.simulator.browser import CHROMIUM_FLAGS, BrowserUnavailable, chromium_path

TASKS = ["scholar-site-info-001", "scholar-paper-retrieval-001"]
PAGES = ["http://scholar.test/", "http://scholar.test/help", "http://scholar.test/search/advanced"]


@pytest.fixture(scope="module")
def chromium():
    try:
        path = chromium_path(shell=True)
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def _text(page) -> str:
    return page.inner_text("body")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.mktemp("har-out")
    args = ["bench", "run", str(SUITE), "--agent", "reference", "--backend", "browser", "--out", str(base / "run")]
    for t in TASKS:
        args += ["--tasks", t]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    done = run_cli("eval", "export-har", str(base / "run"), "-o", str(base / "har"))
    assert done.returncode == 0, done.stderr
    return base


def _visit(context, urls: list[str]) -> list[str]:
    page = context.new_page()
    texts = []
    for url in urls:
        # (networkidle: the page's statistics fetch may answer after `load`, later under load)
        page.goto(url, wait_until="networkidle")
        texts.append(_text(page))
    context.close()
    return texts


_EPOCH_MS = re.compile(r"\b1[6-9]\d{11}\b")  # a time in epoch milliseconds (2020 to 2033)


@pytest.mark.slow
def test_an_exported_run_replays_every_page_in_route_from_har(exported, chromium):
    checked = 0
    for task in TASKS:
        har = exported / "har" / f"{task}.har"
        log = json.loads(har.read_text())["log"]
        entries = log["entries"]
        assert all(e["response"]["headers"] and e["request"]["headers"] for e in entries)
        assert all("text" in e["response"]["content"] for e in entries if e["_webfreeze"]["level"] != "miss")
        assert all(e["startedDateTime"] != "1970-01-01T00:00:00.000Z" for e in entries)  # capture times
        documents = list(dict.fromkeys(e["request"]["url"] for e in entries
                                       if e["_webfreeze"]["main"] and e["response"]["status"] == 200))
        assert documents
        offline = chromium.new_context(viewport={"width": 1920, "height": 1080})
        offline.route_from_har(str(har), not_found="abort")  # (nothing else answers: no network, no replay)
        theirs = _visit(offline, documents)
        # the replay as the episode's browser had it (the determinism runtime, virtual timers, the
        # task's frozen clock), its pages visited in the episode's order, in the same Chromium
        trajectory = json.loads((exported / "run" / "trajectories" / f"{task}.json").read_text())
        server = ReplayServer(ARCHIVE, mode="proxy", inject=True, timers=True, seed=0).start()
        try:
            server.replay.reset(0, when=trajectory["env"].get("snapshot_time"))
            ours = _visit(chromium.new_context(viewport={"width": 1920, "height": 1080},
                                               proxy={"server": server.url, "bypass": "<-loopback>"}), documents)
        finally:
            server.stop()
        for url, a, b in zip(documents, theirs, ours):
            # The pages print the clock in milliseconds; route_from_har's page has no timer pump, so
            # its clock advances with the real time it took (seen under load: "rendered at" 1 ms off).
            # Everything else must be the same text.
            a, b = _EPOCH_MS.sub("<ms>", a), _EPOCH_MS.sub("<ms>", b)
            assert len(a) > 100 and text_similarity(a, b) == 1.0, (url, a[-300:], b[-300:])
            checked += 1
    assert checked >= 3


def test_a_har_playwright_records_imports_and_replays_without_a_miss(tmp_path, chromium):
    har = tmp_path / "recorded.har"
    server = ReplayServer(ARCHIVE, mode="proxy", inject=False, seed=0).start()
    try:
        context = chromium.new_context(proxy={"server": server.url, "bypass": "<-loopback>"}, record_har_path=str(har),
                                       record_har_content="embed")
        page = context.new_page()
        for url in PAGES:
            # (networkidle: the statistics fetch may answer after `load`; the next goto would cut it
            # and the HAR would miss it, seen under CI's load)
            page.goto(url, wait_until="networkidle")
        context.close()  # (writes the HAR)
    finally:
        server.stop()
    archive = tmp_path / "from-har.wfz"
    done = run_cli("archive", "import", str(har), "--to", str(archive))
    assert done.returncode == 0, done.stderr
    with Archive.open(archive) as arc:
        assert [p.url for p in arc.pages()] == PAGES
        assert arc.counts()["exchanges"] >= len(PAGES)
    done = run_cli("replay", "check", str(archive), "--report", str(tmp_path / "check"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(PAGES)} pages: 0 with misses" in done.stdout + done.stderr


def test_a_devtools_har_imports_and_an_entry_without_content_is_listed(tmp_path):
    png = b"\x89PNG\r\n\x1a\n" + bytes(20)
    har = {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
                   "pages": [{"startedDateTime": "2025-03-01T10:00:00.000Z", "id": "page_1",
                              "title": "http://dev.test/", "pageTimings": {}}],
                   "entries": [
                       {"pageref": "page_1", "startedDateTime": "2025-03-01T10:00:00.100Z", "time": 5,
                        "request": {"method": "GET", "url": "http://dev.test/", "httpVersion": "http/2.0",
                                    "headers": [{"name": ":authority", "value": "dev.test"},
                                                {"name": "accept", "value": "text/html"}]},
                        "response": {"status": 200, "statusText": "", "httpVersion": "http/2.0",
                                     "headers": [{"name": ":status", "value": "200"},
                                                 {"name": "content-type", "value": "text/html"},
                                                 {"name": "content-encoding", "value": "gzip"},
                                                 {"name": "content-length", "value": "42"}],
                                     "content": {"size": 40, "mimeType": "text/html",
                                                 "text": "<html><body><p>Hello</p></body></html>"},
                                     "_transferSize": 120}},
                       {"pageref": "page_1", "startedDateTime": "2025-03-01T10:00:00.200Z", "time": 5,
                        "request": {"method": "GET", "url": "http://dev.test/logo.png", "headers": []},
                        "response": {"status": 200, "headers": [{"name": "content-type", "value": "image/png"}],
                                     "content": {"size": len(png), "mimeType": "image/png",
                                                 "text": base64.b64encode(png).decode(), "encoding": "base64"}}},
                       {"startedDateTime": "2025-03-01T10:00:00.300Z", "time": 5,
                        "request": {"method": "POST", "url": "http://dev.test/track", "headers": [],
                                    "postData": {"mimeType": "application/json", "text": "{\"a\": 1}"}},
                        "response": {"status": 200, "headers": [],
                                     "content": {"size": 17, "mimeType": "text/plain"}}},
                       {"startedDateTime": "2025-03-01T10:00:00.400Z", "time": 0,
                        "request": {"method": "GET", "url": "http://dev.test/gone", "headers": []},
                        "response": {"status": 0, "headers": [], "content": {"size": 0, "mimeType": "x-unknown"}}},
                   ]}}
    path = tmp_path / "devtools.har"
    path.write_text(json.dumps(har))
    archive = tmp_path / "dev.wfz"
    done = run_cli("archive", "import", str(path), "--to", str(archive))
    assert done.returncode == 0, done.stderr
    # the skipped entries are counted in the import's summary
    assert "1 har: no content record(s) not stored" in done.stderr and "1 har: no response" in done.stderr
    with Archive.open(archive) as arc:
        got = {e.url: e for e in arc.exchanges()}
        assert set(got) == {"http://dev.test/", "http://dev.test/logo.png"}  # (none invented)
        page = got["http://dev.test/"]
        assert page.body() == b"<html><body><p>Hello</p></body></html>"
        assert page.response.header("content-encoding") is None  # (the HAR's body is decoded)
        assert page.response.header("content-length") == str(len(page.body()))
        assert not any(k.startswith(":") for k, _ in page.headers)
        assert page.request.header("accept") == "text/html"
        assert got["http://dev.test/logo.png"].body() == png
        info = arc.session(page.session_id)["info"]["har"]
        assert [(w["url"], w["why"]) for w in info["without_content"]] == [
            ("http://dev.test/track", "no content"), ("http://dev.test/gone", "no response")]
        assert [p.url for p in arc.pages()] == ["http://dev.test/"]
