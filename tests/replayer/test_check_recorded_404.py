"""`replay check` counts a script or stylesheet the site answered 404 (as recorded: Solara's page
asks a CDN copy of KaTeX its asset package lacks) with its answer, as the crawl and the agent
environment do: Chromium fails such a request after the 404 (ERR_ABORTED), and the check called it
a miss, so a whole capture exited 1 with "2 pages: 2 with misses"."""

from __future__ import annotations

import json

import pytest
from cli_runner import run_cli

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://assets.test"
PAGE = """<!DOCTYPE html><html><head><title>Assets</title><link rel="stylesheet" href="/gone.css">
<script src="/gone.js"></script></head><body><p>Hello</p></body></html>"""


@pytest.mark.parametrize("mode", ["proxy", "direct"])
def test_a_recorded_404_script_and_stylesheet_are_no_miss(tmp_path, mode):
    archive = tmp_path / "assets.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_check_recorded_404")
        for rel, status, ctype, body in (("/", 200, "text/html; charset=utf-8", PAGE),
                                         ("/gone.css", 404, "text/html", "<h1>Not Found</h1>"),
                                         ("/gone.js", 404, "text/html", "<h1>Not Found</h1>")):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=status,
                                      reason="OK" if status == 200 else "Not Found", session_id=sid,
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode()))
        arc.add_page(session_id=sid, url=SITE + "/", captured_at="2026-01-01T00:00:01Z", title="Assets",
                     dom=b"<html><body><p>Hello</p></body></html>")
    r = run_cli("replay", "check", archive, "--mode", mode, "--report", tmp_path / "check", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 page: 0 with misses" in r.stdout, r.stdout
    report = json.loads((tmp_path / "check" / "report.json").read_text())
    assert report["pages"][0]["misses"] == []
