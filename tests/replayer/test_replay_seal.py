"""Issue 45's seal, end to end: an archived page that reaches out 17 ways (to a loopback canary on
127.0.0.1, localhost and [::1], and to a public host name whose lookups a stub DNS server logs)
sends 0 requests and 0 lookups in each of `replay check`, the environment (both backends),
`replay browse` in proxy and in direct mode, and direct mode opened in a plain headless Chromium.

Lookups are watched by running each client in a mount namespace whose /etc/resolv.conf names the
stub (root and `unshare`); each run first looks up a control name (the plain Chromium probe) or
the test checks the stub with the namespace's own resolver, so a watch that sees nothing fails."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cli_runner import assert_one_line_error
from leak_probe import CONTROL_HOST, LEAK_HOST, PAGE_HOST, Canary, StubDns, leak_page, service_worker, watched_prefix

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

T0 = "2024-03-01T12:00:00Z"
TS = "20240301120000"
PAGE = f"http://{PAGE_HOST}/leak.html"
PROBE = Path(__file__).resolve().parents[1] / "support" / "leak_probe.py"


@pytest.fixture(scope="module")
def watch(tmp_path_factory):
    """(archive, canary, stub DNS, command prefix that sends lookups to the stub)."""
    tmp = tmp_path_factory.mktemp("seal")
    if os.geteuid() != 0:
        pytest.skip("watching DNS lookups needs root and unshare (a mount namespace with its own resolv.conf)")
    try:
        dns = StubDns()
    except OSError as exc:
        pytest.skip(f"cannot start the stub DNS server: {exc}")
    prefix = watched_prefix(str(tmp), dns.address)
    if prefix is None:
        dns.close()
        pytest.skip("watching DNS lookups needs root and unshare (a mount namespace with its own resolv.conf)")
    canary = Canary()
    archive = tmp / "leak.wfz"
    html = leak_page(canary.port).encode()
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_replay_seal")
        arc.add_exchange(Exchange(url=PAGE, captured_at=T0, status=200, payload=html, session_id=sid,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        arc.add_exchange(Exchange(url=f"http://{PAGE_HOST}/sw.js", captured_at=T0, status=200, session_id=sid,
                                  payload=service_worker(canary.port).encode(),
                                  resp_headers=[("Content-Type", "text/javascript")]))
        arc.add_page(session_id=sid, url=PAGE, captured_at=T0, title="leak", dom=html)
    try:
        yield archive, canary, dns, prefix, tmp
    finally:
        dns.close()
        canary.close()


def _clean(canary, dns):
    canary.hits.clear()
    dns.names.clear()


def _leaks(canary, dns) -> tuple[list, list]:
    return list(canary.hits), [n for n in dns.names if "webfreeze-canary" in n and n != CONTROL_HOST]


def test_the_watch_sees_requests_and_lookups(watch):
    archive, canary, dns, prefix, _ = watch
    _clean(canary, dns)
    for host in ("127.0.0.1", "[::1]", "localhost"):
        try:
            urllib.request.urlopen(f"http://{host}:{canary.port}/x", timeout=5)
        except OSError:
            pass
    r = subprocess.run([*prefix, sys.executable, "-c", f"import socket; socket.getaddrinfo({LEAK_HOST!r}, 80)"],
                       capture_output=True, text=True, timeout=60)
    assert "gaierror" in r.stderr  # answered NXDOMAIN by the stub
    assert len(canary.hits) >= 3 and LEAK_HOST in dns.names


def test_replay_check_in_both_modes(watch, cli):
    archive, canary, dns, prefix, tmp = watch
    for mode in ("proxy", "direct"):
        _clean(canary, dns)
        r = cli("replay", "check", archive, "--mode", mode, "--report", tmp / f"check-{mode}", prefix=prefix,
                timeout=300)
        assert "1 page:" in r.stdout, r.stdout + r.stderr  # (it misses the canary's URLs: exit 1)
        report = json.loads((tmp / f"check-{mode}" / "report.json").read_text())
        assert report["pages"][0]["error"] is None
        # (the page ran: its requests came to the replay, in the form each mode asks)
        assert any(m.endswith(f"http://127.0.0.1:{canary.port}/fetch1") for m in report["pages"][0]["misses"])
        assert _leaks(canary, dns) == ([], []), mode


@pytest.mark.parametrize("backend", ["browser", "text"])
def test_the_environment(watch, backend):
    archive, canary, dns, prefix, _ = watch
    _clean(canary, dns)
    r = subprocess.run([*prefix, sys.executable, str(PROBE), "env", str(archive), backend, PAGE],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _leaks(canary, dns) == ([], [])
    # (the page was the archive's, and in the browser it ran: its requests came to the replay)
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["page"] == ["exact"], got
    if backend == "browser":
        assert {f"http://127.0.0.1:{canary.port}/fetch1", f"http://127.0.0.1:{canary.port}/refresh"} <= set(got["misses"]), got


def _status(port: int, what: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_webfreeze/{what}", timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("mode", ["proxy", "direct"])
def test_replay_browse(watch, mode):
    archive, canary, dns, prefix, _ = watch
    _clean(canary, dns)
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "webfreeze", "replay", "browse", str(archive),
                             "--mode", mode, "--headless"], stderr=subprocess.PIPE, text=True,
                            stdout=subprocess.DEVNULL)
    lines = []
    try:
        for _ in range(3):
            lines.append(proc.stderr.readline())
        text = "".join(lines)
        port = int(re.search(r"at http://127\.0\.0\.1:(\d+)", text).group(1))
        opened = re.search(r"opened (\S+)", text).group(1)
        assert opened == (PAGE if mode == "proxy" else f"http://127.0.0.1:{port}/{TS}/{PAGE}")
        assert "--proxy-bypass-list=<-loopback>" in text or mode == "direct"
        assert f"--host-resolver-rules=MAP * 127.0.0.1:{port}" in text
        deadline = time.monotonic() + 90
        while True:  # until the delayed fetch and the meta refresh (2 s) have come to the replay
            missed = {m["url"] for m in _status(port, "misses")}
            if {f"http://127.0.0.1:{canary.port}/late", f"http://127.0.0.1:{canary.port}/refresh"} <= missed:
                break
            assert time.monotonic() < deadline, f"the page did not finish: {sorted(missed)}"
            time.sleep(0.3)
        assert _leaks(canary, dns) == ([], [])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out = proc.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, out
    assert "served " in out
    # the browser and its profile are gone with it
    profile = re.search(r"--user-data-dir=(\S+)", "".join(lines)).group(1)
    assert not Path(profile).exists()
    ps = subprocess.run(["pgrep", "-f", profile], capture_output=True, text=True)
    assert ps.stdout.strip() == ""


def test_direct_mode_in_a_plain_chromium(watch):
    archive, canary, dns, prefix, _ = watch
    from webfreeze.replayer.server import ReplayServer

    _clean(canary, dns)
    with ReplayServer(archive, mode="direct", miss_report=None) as srv:
        r = subprocess.run([*prefix, sys.executable, str(PROBE), "plain", f"{srv.url}/{TS}/{PAGE}", CONTROL_HOST],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        final = json.loads(r.stdout.strip().splitlines()[-1])["final_url"]
        missed = {m["url"] for m in srv.misses}
    assert final == f"{srv.url}/{TS}/http://127.0.0.1:{canary.port}/refresh"
    assert CONTROL_HOST in dns.names  # the watch saw this Chromium's lookups
    assert _leaks(canary, dns) == ([], [])
    # what the page asked for came to the replay instead, rewritten into the archive's URL space
    c = canary.port
    for url in (f"http://127.0.0.1:{c}/img.png", f"http://localhost:{c}/script.js", f"http://127.0.0.1:{c}/fetch1",
                f"http://localhost:{c}/fetch2", f"http://[::1]:{c}/fetch3", f"http://[::1]:{c}/xhr",
                f"http://localhost:{c}/events", f"http://127.0.0.1:{c}/beacon", f"http://localhost:{c}/frame",
                f"http://localhost:{c}/import.css", f"http://[::1]:{c}/font.woff", f"http://{LEAK_HOST}/late",
                f"http://127.0.0.1:{c}/late", f"http://127.0.0.1:{c}/refresh"):
        assert url in missed, (url, sorted(missed))
    # (a WebSocket the archive holds no recording of is a miss of the replay, its handshake answered
    # 404; the service worker is refused by the shim)


def test_replay_browse_of_no_archive_is_one_line(cli_here, tmp_path):
    assert_one_line_error(cli_here("replay", "browse", tmp_path / "nope.wfz", "--headless"), code=1,
                          contains="no such archive")


def test_replay_browse_with_a_window_needs_a_display(cli_here, watch, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert_one_line_error(cli_here("replay", "browse", watch[0]), code=1, contains="--headless")
