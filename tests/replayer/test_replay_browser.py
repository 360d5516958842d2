"""Replay in real Chromium: a recorded crawl of the three simulated sites, the sites stopped and
canaries listening on their ports, replays hermetically with no page misses, and two replays
write byte-identical DOM snapshots and screenshots (page text from Date.now/Math.random included)."""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import pytest

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.sites import SITES
from webfreeze.simulator.sites.common import SiteServer

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# A depth-two crawl of each site cut short (breadth first: the start page and the first pages it links
# to): a replay that is hermetic and byte-identical on these is so on more of the same.
PAGES_PER_SITE = {"scholar": 6, "shop": 5, "booking": 4}
START = {"scholar": "/", "shop": "/", "booking": "/search?kind=restaurant"}


class Canary:
    """Listens where a live site used to be and counts every connection attempt."""

    def __init__(self, port: int):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 30
        while True:  # the stopped site's last connections may hold the port for a moment
            try:
                self.sock.bind(("127.0.0.1", port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.hits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.hits += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def crawl_archive(tmp_path_factory):
    import os

    from webfreeze.recorder.crawl import crawl

    tmp = tmp_path_factory.mktemp("replay-browser")
    os.environ["WEBFREEZE_HOME"] = str(tmp / "home")
    archive = tmp / "sites.wfz"
    canaries = []
    try:
        for name, pages in PAGES_PER_SITE.items():
            site = SiteServer(SITES[name](0)).start()
            try:
                result = crawl(archive, site.url + START[name], depth=2, max_pages=pages)
            finally:
                site.stop()
            # the site is gone; a canary takes its port at once, so anything leaking lands there
            canaries.append(Canary(int(site.url.rsplit(":", 1)[1])))
            assert result.pages == pages
        yield archive, canaries, tmp
    finally:
        for c in canaries:
            c.close()


def test_replay_is_hermetic_complete_and_byte_identical(crawl_archive, cli):
    archive, canaries, tmp = crawl_archive
    for c in canaries:
        c.hits = 0
    runs = []
    for n in (1, 2):
        report = tmp / f"check-{n}"
        r = cli("replay", "check", archive, "--report", report, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"{sum(PAGES_PER_SITE.values())} pages: 0 with misses" in r.stdout
        runs.append(report)
    assert [c.hits for c in canaries] == [0, 0, 0]

    import json

    reports = [json.loads((d / "report.json").read_text()) for d in runs]
    # page by page first, so a failure names the page, the fields and both values (pytest's diff
    # of the whole report is cut short where the difference is)
    assert len(reports[0]["pages"]) == len(reports[1]["pages"])
    for a, b in zip(reports[0]["pages"], reports[1]["pages"]):
        differing = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        for key in ("dom", "screenshot"):
            if a[key] and b[key] and Path(runs[0], a[key]).read_bytes() != Path(runs[1], b[key]).read_bytes():
                differing[f"{key} bytes"] = "differ"
        assert not differing, f"{a['url']}: {differing}"
    assert reports[0] == reports[1]
    pages = reports[0]["pages"]
    with Archive.open(archive) as arc:
        assert len(pages) == arc.conn.execute("SELECT count(*) FROM pages").fetchone()[0]
    for p in pages:
        assert p["error"] is None and p["misses"] == [], p
        assert p["text_similarity"] > 0.8, p  # short pages: the random token differs from the capture
        assert p["dom"] and p["screenshot"], p
    # the page script's Date.now() and Math.random() output is in the DOM, frozen and seeded
    dom = Path(runs[0], pages[0]["dom"]).read_text()
    m = re.search(r"rendered at (\d{13}) token ([0-9a-z]+)", dom)
    assert m, "the page script did not run in replay"
    # the frozen clock starts at the page's capture time
    with Archive.open(archive) as arc:
        row = arc.conn.execute("SELECT captured_at FROM exchanges WHERE url=? ORDER BY id LIMIT 1",
                               (pages[0]["url"],)).fetchone()
    from webfreeze.archives.timeutil import parse_time

    t0 = int(parse_time(row[0]).timestamp() * 1000)
    assert t0 <= int(m.group(1)) < t0 + 100
    # the XHR with its timestamp cache buster was answered from the archive
    assert "stats unavailable" not in dom and "(served " in dom
    html = (runs[0] / "report.html").read_text()
    assert html.count("<tr class=\"ok\">") == len(pages)


def test_a_different_seed_changes_random_but_not_time(crawl_archive, cli):
    archive, _, tmp = crawl_archive
    doms = []
    for seed in (0, 1):
        report = tmp / f"seed-{seed}"
        r = cli("replay", "check", archive, "--report", report, "--limit", "1", "--seed", str(seed), timeout=300)
        assert r.returncode == 0, r.stderr
        doms.append(re.search(r"rendered at (\d+) token (\w+)", (report / "pages").joinpath(
            sorted(p.name for p in (report / "pages").glob("*.replay.html"))[0]).read_text()).groups())
    assert doms[0][0] == doms[1][0] and doms[0][1] != doms[1][1]
