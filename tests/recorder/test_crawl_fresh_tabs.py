"""The crawl captures each page in a new tab, and its check loads each in a new tab: what a page
keeps per tab (``sessionStorage``) never reaches the next page. NiceGUI keeps a tab id there and
puts it, with the id it found there before (``old_tab_id``), in its WebSocket's URL: captured in
one tab, every page after the first was recorded with the first page's id, and an agent's episode
starting on any of them (a fresh tab) asked for a socket the archive did not hold."""

from __future__ import annotations

import pytest
from static_site import static_site

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# each page asks for its state with what the tab held before it (none on a fresh visit)
SCRIPT = b"""<script>
const old = sessionStorage.getItem('tab');
sessionStorage.setItem('tab', 'held');
fetch('/state?old=' + (old || 'none')).then((r) => r.text()).then((t) => { document.getElementById('s').textContent = t; });
</script>"""


def _page(title: bytes, links: bytes) -> bytes:
    return (b"<!doctype html><html><head><title>" + title + b"</title></head><body><h1>" + title
            + b"</h1><p id=s>loading</p>" + links + SCRIPT + b"</body></html>")


def test_each_page_is_captured_and_checked_as_a_fresh_visit(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    site = {"/": _page(b"Home", b'<a href="/b">B</a> <a href="/c">C</a>'), "/b": _page(b"B", b'<a href="/">Home</a>'),
            "/c": _page(b"C", b'<a href="/">Home</a>'), "/state?old=none": (b"fresh state", "text/plain"),
            "/state?old=held": (b"state carried from another page", "text/plain")}
    archive = tmp_path / "tabs.wfz"
    with static_site(site) as port:
        r = cli("record", "crawl", "http://tabs.test/", "--resolve", f"tabs.test=127.0.0.1:{port}",
                "--archive", archive, "--depth", "1", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 pages" in r.stdout and "(complete)" in r.stdout, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        asked = sorted({e.url for e in arc.exchanges(prefix="http://tabs.test/state")})
    assert asked == ["http://tabs.test/state?old=none"], asked
