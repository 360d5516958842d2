"""A page whose scripts show its content on a timer after the network has gone quiet is captured
with that content (found on Verdaccio 6: React's Suspense holds a resolved boundary back up to
300 ms on a timer, and the crawl's DOM snapshot showed the page's header and footer alone, while
its screenshot, taken a moment later, showed the package)."""

from __future__ import annotations

import json

import pytest
from static_site import static_site

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# The data comes at once; the page shows it 600 ms later (a Suspense throttle, a fade-in), and a
# second timer asks for more after 500 ms (a lazy panel), shown when it comes.
PAGE = b"""<!doctype html><html><head><title>Late</title></head><body>
<header>Registry</header><main id="main">Loading...</main><aside id="side"></aside><footer>Powered by</footer>
<script>
fetch('/data.json').then(function (r) { return r.json(); }).then(function (d) {
  setTimeout(function () { document.getElementById('main').textContent = d.readme; }, 600);
});
setTimeout(function () {
  fetch('/late.json').then(function (r) { return r.json(); }).then(function (d) {
    document.getElementById('side').textContent = d.side;
  });
}, 500);
</script></body></html>"""

ANSWERS = {
    "/": (PAGE, "text/html; charset=utf-8"),
    "/data.json": (b'{"readme": "The magic number is 4711"}', "application/json"),
    "/late.json": (b'{"side": "Maintained by the Walk lab"}', "application/json"),
}


@pytest.fixture
def site():
    with static_site(ANSWERS) as port:
        yield port


def test_content_a_timer_shows_after_the_network_is_quiet_is_captured(tmp_path, monkeypatch, cli, site):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    archive = tmp_path / "late.wfz"
    r = cli("record", "crawl", "http://late.test/", "--resolve", f"late.test=127.0.0.1:{site}",
            "--archive", archive, "--depth", "0", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        (page,) = list(arc.pages())
        dom = page.dom().decode()
        assert "The magic number is 4711" in dom  # shown by a timer 600 ms after its data came
        assert "Maintained by the Walk lab" in dom  # fetched by a timer, then shown
        assert [e.status for e in arc.exchanges(url="http://late.test/late.json")] == [200]
        assert page.extra["complete"] is True  # and the check waited for the late request too
    # replay check waits for the same timers: the replayed page shows what was captured
    r = cli("replay", "check", archive, "--report", tmp_path / "report", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (checked,) = json.loads((tmp_path / "report" / "report.json").read_text())["pages"]
    assert checked["text_similarity"] == 1.0 and checked["misses"] == []
