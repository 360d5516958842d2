"""``replay check``'s closing line says how many requests failed at capture: an avatar on a host
the recording machine could not reach (Verdaccio 6's Gravatar images, recorded as the proxy's 502)
replays as it was recorded, so no page misses anything and the exit status is 0, while the crawl
called every such page incomplete; the line said "0 with misses" and nothing else. The same holds
where Chromium takes the placeholder for no answer at all (a cross-origin XHR, a script over HTTPS
from a CDN the recording machine could not reach: Django Oscar's jQuery): they were misses, the
exit status 1, where `replay serve` and the agent environment answer them as recorded."""

from __future__ import annotations

import json
import socket

import pytest
from static_site import static_site

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))


@pytest.fixture
def site():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens there once the socket is closed
    page = (f'<!doctype html><html><head><title>Registry</title></head><body><h1>tiny-color</h1>'
            f'<img alt="W" width="40" height="40" src="http://127.0.0.1:{dead}/avatar/82a2"></body></html>').encode()
    with static_site({"*": page}) as port:
        yield port, f"http://127.0.0.1:{dead}/avatar/82a2"


def test_requests_failed_at_capture_are_said_in_the_closing_line(tmp_path, monkeypatch, cli, site):
    port, avatar = site
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    archive = tmp_path / "reg.wfz"
    r = cli("record", "crawl", "http://reg.test/", "--resolve", f"reg.test=127.0.0.1:{port}",
            "--archive", archive, "--depth", "0", timeout=300)
    assert r.returncode == 3 and f"(missing: {avatar} (" in r.stdout, r.stdout + r.stderr
    r = cli("replay", "check", archive, "--report", tmp_path / "report", timeout=300)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["summary"]["requests_failed_at_capture"] == 1 and report["summary"]["missed_requests"] == 0
    assert r.returncode == 0, r.stdout + r.stderr  # (the image replays as recorded: no miss)
    assert "1 page: 0 with misses (0 requests), 1 request failed at capture (its site never answered the " \
           "recording: listed per page in the report), 0 failed;" in r.stdout, r.stdout


@pytest.fixture
def catalogue_site():
    # Node-RED's editor asks a catalogue on another host with jQuery's cache-busting `_=` (a
    # cross-origin XHR); on a machine that cannot reach it the recording holds the proxy's 502,
    # which carries no CORS header, so the browser refuses it again on replay: no response at all
    page = (b'<!doctype html><html><head><title>Editor</title>'
            b'<script src="https://ajax.cdn.invalid/jquery/3.7.1/jquery.min.js"></script></head><body><h1>Flows</h1>'
            b'<script>fetch("http://catalogue.invalid/catalogue.json?_=" + Date.now()).catch(function () {'
            b' document.body.insertAdjacentHTML("beforeend", "<p>no catalogue</p>"); });'
            b'</script></body></html>')
    with static_site({"*": page}) as port:
        yield port


def test_a_cross_origin_request_failed_at_capture_is_said_so_though_the_browser_refuses_it(
        tmp_path, monkeypatch, cli, catalogue_site):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    archive = tmp_path / "editor.wfz"
    r = cli("record", "crawl", "http://editor.test/", "--resolve", f"editor.test=127.0.0.1:{catalogue_site}",
            "--archive", archive, "--depth", "0", timeout=300)
    assert r.returncode == 3 and "http://catalogue.invalid/catalogue.json?_=" in r.stdout, r.stdout + r.stderr
    assert "(missing: https://ajax.cdn.invalid/jquery/3.7.1/jquery.min.js (" in r.stdout, r.stdout
    r = cli("replay", "check", archive, "--report", tmp_path / "report", timeout=300)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (page,) = report["pages"]
    # the browser takes no answer, and the report says why: the site never answered the recording,
    # which no repair of the archive can change; the replay answered as the capture went: no miss
    assert sorted(u.split("?")[0] for u in page["failed_at_capture"]) == [
        "http://catalogue.invalid/catalogue.json", "https://ajax.cdn.invalid/jquery/3.7.1/jquery.min.js"], page
    assert page["misses"] == [] and page["text_similarity"] == 1.0, page  # ("no catalogue" both times)
    assert report["summary"]["requests_failed_at_capture"] == 2, report["summary"]
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 page: 0 with misses (0 requests), 2 requests failed at capture" in r.stdout, r.stdout
