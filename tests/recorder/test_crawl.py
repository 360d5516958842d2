"""`record crawl`: real Chromium through real mitmproxy over the simulated scholar site."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from PIL import Image

from webfreeze.archives import Archive
from webfreeze.archives.verify import verify
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.sites.common import SiteServer
from webfreeze.simulator.sites.scholar import ScholarSite

try:
    chromium_path()
except BrowserUnavailable as exc:  # `make test` installs it; a bare checkout may not have it
    pytestmark = pytest.mark.skip(reason=str(exc))


class Logged:
    """WSGI middleware remembering every URL the site served."""

    def __init__(self, app):
        self.app, self.served, self.lock = app, set(), threading.Lock()

    def __call__(self, environ, start_response):
        qs = environ.get("QUERY_STRING")
        url = f"http://{environ['HTTP_HOST']}{environ['PATH_INFO']}" + (f"?{qs}" if qs else "")
        with self.lock:
            self.served.add(url)
        return self.app(environ, start_response)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_depth_two_crawl_of_scholar(tmp_path, home, cli):
    logged = Logged(ScholarSite(0))
    site = SiteServer(logged).start()
    archive = tmp_path / "scholar.wfz"
    try:
        # --no-check: each page's replay check would double the crawl's time; the check is tested in
        # test_crawl_check.py, and on whole crawls by test_replay_browser.py and the test bed's tests
        # 75 pages: the start page, the 67 pages it links to and the first pages of depth two
        result = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "2", "--max-pages", "75",
                     "--no-check", timeout=600)
    finally:
        site.stop()
    assert result.returncode == 0, result.stderr
    with Archive.open(archive) as arc:
        pages = list(arc.pages())
        assert len(pages) == 75 and len({p.url for p in pages}) == 75
        assert {p.extra["depth"] for p in pages} == {0, 1, 2}
        for p in pages:
            assert p.screenshot_digest and p.dom_digest, p.url
        shot = pages[3].screenshot()  # lossless WebP, the first 1920x1080
        assert shot[:4] == b"RIFF" and shot[8:12] == b"WEBP"
        assert Image.open(io.BytesIO(shot)).size == (1920, 1080)
        assert not any("complete" in p.extra for p in pages)  # unchecked: nothing claimed either way
        assert b"</html>" in pages[3].dom()
        recorded = {r.url for r in arc.exchanges()}
        assert logged.served <= recorded, sorted(logged.served - recorded)[:5]
        assert {u.split("/")[2] for u in recorded} == {site.url.split("/")[2]}  # no browser-internal traffic
        # the page scripts ran in the browser: the XHR with its cache-busting timestamp was recorded
        assert any("/api/stats?_=" in u for u in recorded)
        assert verify(arc.path).ok


def _page_count(path) -> int:
    try:
        with Archive.open(path) as arc:
            return arc.conn.execute("SELECT count(*) FROM pages").fetchone()[0]
    except Exception:
        return 0


def test_sigkill_mid_crawl_then_resume(tmp_path, home):
    site = SiteServer(ScholarSite(0)).start()
    archive = tmp_path / "killed.wfz"
    args = [sys.executable, "-m", "webfreeze", "record", "crawl", f"{site.url}/list/cs/recent", "--archive",
            str(archive), "--depth", "1", "--max-pages", "30"]
    env = {**os.environ, "WEBFREEZE_HOME": str(home)}
    try:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600  # (the crawl's browser starts slowly on a loaded machine)
        while time.monotonic() < deadline and _page_count(archive) < 6 and proc.poll() is None:
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)
        assert proc.returncode == -signal.SIGKILL
        before = _page_count(archive)
        assert 6 <= before < 30, f"{before} pages when the crawl was killed (6 wanted, within 600 s)"
        with Archive.open(archive) as arc:
            assert verify(arc.path).ok
        again = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert "resumed" in again.stdout
    finally:
        site.stop()
    with Archive.open(archive) as arc:
        urls = [p.url for p in arc.pages()]
        assert len(urls) == 30 and len(set(urls)) == 30  # nothing visited twice, nothing skipped
        assert verify(arc.path).ok


def test_crawl_bad_input_is_one_line(tmp_path, home, cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens once the socket is closed
    r = cli("record", "crawl", f"http://127.0.0.1:{dead}/", "--archive", tmp_path / "a.wfz")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "unreachable" in r.stderr
    r = cli("record", "crawl", "http://127.0.0.1:1/", "--archive", tmp_path / "a.wfz", "--scope", "([a-z")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "invalid --scope" in r.stderr
    site = SiteServer(ScholarSite(0)).start()
    try:
        r = cli("record", "crawl", f"{site.url}/", "--archive", tmp_path / "no" / "a.wfz")
    finally:
        site.stop()
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "no such directory" in r.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name != "home"] == []  # no archive, no partial file
