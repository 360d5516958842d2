"""Recording real-looking sites: the simulated sites over TLS (a test CA made here, or a
self-signed certificate), recorded under their own names with and without ``--resolve``, an
``http://`` seed redirected to ``https://``; every recording then replays with 0 misses. Also
the crawl's honest outcomes (a failed seed, failed later pages) and ``--scope prefix``."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys

import pytest
from tls_certs import LocalCA, self_signed
from werkzeug.wrappers import Request, Response

from webfreeze.archives import Archive
from webfreeze.recorder.crawl import scope_matcher, scope_prefix
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.sites.common import SiteServer, https_redirect, tls_context
from webfreeze.simulator.sites.scholar import ScholarSite

try:
    chromium_path()
except BrowserUnavailable as exc:  # `make test` installs it; a bare checkout may not have it
    pytestmark = pytest.mark.skip(reason=str(exc))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One webfreeze home (its recording CA) for the module: made once, not per test."""
    path = tmp_path_factory.mktemp("home")
    old = os.environ.get("WEBFREEZE_HOME")
    os.environ["WEBFREEZE_HOME"] = str(path)
    yield path
    if old is None:
        os.environ.pop("WEBFREEZE_HOME", None)
    else:
        os.environ["WEBFREEZE_HOME"] = old


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return LocalCA(tmp_path_factory.mktemp("ca"))


def tls_site(cert_key, app=None) -> SiteServer:
    return SiteServer(app or ScholarSite(0), ssl_context=tls_context(*map(str, cert_key))).start()


def urls_of(archive) -> list[str]:
    with Archive.open(archive) as arc:
        return [r.url for r in arc.exchanges()]


def replay_check_clean(cli, archive, report) -> dict:
    r = cli("replay", "check", archive, "--report", report, timeout=300)
    summary = json.loads((report / "report.json").read_text())["summary"]
    assert r.returncode == 0, r.stderr + json.dumps(summary)
    assert summary["pages_with_misses"] == 0 and summary["missed_requests"] == 0 and summary["pages_with_errors"] == 0
    assert summary["min_text_similarity"] > 0.9  # the site writes the live clock and a random token
    return summary


def test_scope_prefix_is_the_seed_url_up_to_its_last_slash():
    assert scope_prefix("https://docs.test/library/index.html") == "https://docs.test/library/"
    assert scope_prefix("https://docs.test/library/") == "https://docs.test/library/"
    assert scope_prefix("https://docs.test") == "https://docs.test/"
    inside = scope_matcher("https://docs.test/library/index.html", "prefix")
    assert inside("https://docs.test/library/os.html") and inside("https://docs.test/library/sub/x.html")
    assert not inside("https://docs.test/libraryx.html") and not inside("https://docs.test/tutorial/")


def test_https_crawl_with_resolve_records_the_sites_own_name(tmp_path, home, ca, cli):
    site = tls_site(ca.issue(["scholar.test"]))
    archive = tmp_path / "a.wfz"
    try:
        r = cli("record", "crawl", "https://scholar.test/", "--archive", archive, "--depth", "1", "--max-pages", "3",
                "--resolve", f"scholar.test=127.0.0.1:{site.port}", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0, r.stderr
    urls = urls_of(archive)
    assert urls and all(u.startswith("https://scholar.test/") for u in urls), urls
    assert "https://scholar.test/static/style.css?v=20240315" in urls
    replay_check_clean(cli, archive, tmp_path / "report")


def test_https_crawl_without_resolve(tmp_path, home, ca, cli):
    """The name resolves to loopback through the system (``localhost``), no ``--resolve``."""
    site = tls_site(ca.issue(["localhost"]))
    archive = tmp_path / "a.wfz"
    try:
        r = cli("record", "crawl", f"https://localhost:{site.port}/", "--archive", archive, "--depth", "1",
                "--max-pages", "2", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0, r.stderr
    urls = urls_of(archive)
    assert urls and all(u.startswith(f"https://localhost:{site.port}/") for u in urls), urls
    replay_check_clean(cli, archive, tmp_path / "report")


def test_http_seed_redirected_to_a_self_signed_https_site(tmp_path, home, cli):
    """A staging copy under the public name: plain HTTP answers with a redirect to HTTPS, whose
    certificate is self-signed. The crawl reaches it through the recording proxy (no check of its
    own goes around it) and stores both legs under the name."""
    site = tls_site(self_signed(tmp_path / "certs", ["scholar.test"]))
    plain = SiteServer(https_redirect("https://scholar.test")).start()
    archive = tmp_path / "a.wfz"
    try:
        r = cli("record", "crawl", "http://scholar.test/", "--archive", archive, "--depth", "1", "--max-pages", "2",
                "--resolve", f"scholar.test:80=127.0.0.1:{plain.port}",
                "--resolve", f"scholar.test:443=127.0.0.1:{site.port}", timeout=300)
    finally:
        site.stop()
        plain.stop()
    assert r.returncode == 0, r.stderr
    urls = urls_of(archive)
    assert urls[0] == "http://scholar.test/" and "https://scholar.test/" in urls
    assert all(u.startswith(("http://scholar.test/", "https://scholar.test/")) for u in urls), urls
    with Archive.open(archive) as arc:
        first = next(arc.pages())
        assert first.extra["final_url"] == "https://scholar.test/"
    replay_check_clean(cli, archive, tmp_path / "report")


SESSION_SCRIPT = """
def run(page):
    page.click("text=Computer Science")
    page.wait_for_load_state("load")
"""


def test_https_session_with_resolve_on_a_self_signed_site(tmp_path, home, cli):
    site = tls_site(self_signed(tmp_path / "certs", ["scholar.test"]))
    script = tmp_path / "drive.py"
    script.write_text(SESSION_SCRIPT)
    archive = tmp_path / "s.wfz"
    try:
        r = cli("record", "session", "https://scholar.test/", "--archive", archive, "--script", script,
                "--trajectory", tmp_path / "t.json", "--resolve", f"scholar.test=127.0.0.1:{site.port}", timeout=300)
    finally:
        site.stop()
    assert r.returncode == 0, r.stderr
    urls = urls_of(archive)
    assert all(u.startswith("https://scholar.test/") for u in urls), urls
    steps = json.loads((tmp_path / "t.json").read_text())["steps"]
    assert any(s["action"] == "click" for s in steps)
    assert all(s["url"].startswith("https://scholar.test/") for s in steps if s.get("url"))


def test_record_proxy_with_resolve_keeps_the_name(tmp_path, home, ca, cli):
    site = tls_site(ca.issue(["scholar.test"]))
    plain = SiteServer(ScholarSite(0)).start()
    archive = tmp_path / "p.wfz"
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "record", "proxy", "--archive", str(archive),
                             "--port", "0", "--resolve", f"scholar.test:443=127.0.0.1:{site.port}",
                             "--resolve", f"scholar.test:80=127.0.0.1:{plain.port}"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # "recording into ... through proxy http://127.0.0.1:PORT (session ...)"
        port = int(line.split("through proxy http://127.0.0.1:")[1].split()[0])
        ca_file = cli("record", "ca").stdout.strip()
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30,
                                           context=ssl.create_default_context(cafile=ca_file))
        conn.set_tunnel("scholar.test", 443)
        conn.request("GET", "/abs/2403.00001")
        assert conn.getresponse().read()
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "http://scholar.test/list/cs/recent")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        site.stop()
        plain.stop()
    assert proc.returncode == 0
    assert sorted(urls_of(archive)) == ["http://scholar.test/list/cs/recent", "https://scholar.test/abs/2403.00001"]


def broken_links_site(environ, start_response):
    """A site whose home page links one good page and one that answers 500."""
    path = Request(environ).path
    if path == "/":
        body, status = '<a href="/good">good</a> <a href="/broken">broken</a>', 200
    elif path == "/good":
        body, status = "<p>good page</p>", 200
    else:
        body, status = "<p>server error</p>", 500
    return Response(f"<!doctype html><title>{path}</title>{body}", status=status, content_type="text/html")(
        environ, start_response)


def test_failed_seed_exits_1_and_failed_pages_are_listed(tmp_path, home, cli):
    site = SiteServer(broken_links_site).start()
    try:
        r = cli("record", "crawl", f"{site.url}/broken", "--archive", tmp_path / "seed.wfz", timeout=120)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "500" in r.stderr, r.stderr
        assert not (tmp_path / "seed.wfz").exists()  # nothing published
        archive = tmp_path / "a.wfz"
        r = cli("record", "crawl", f"{site.url}/", "--archive", archive, "--depth", "1", timeout=120)
    finally:
        site.stop()
    assert r.returncode == 0, r.stderr
    assert "2 pages in total, 1 failed" in r.stdout and f"failed: {site.url}/broken (HTTP 500)" in r.stdout
    with Archive.open(archive) as arc:
        assert sorted(p.url for p in arc.pages()) == [f"{site.url}/", f"{site.url}/good"]
    info = json.loads(cli("archive", "info", archive, "--json").stdout)
    assert [(f["url"], f["why"]) for f in info["failed_pages"]] == [(f"{site.url}/broken", "HTTP 500")]
    assert f"{site.url}/broken (HTTP 500)" in cli("archive", "info", archive).stdout
