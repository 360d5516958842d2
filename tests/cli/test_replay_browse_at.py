"""`replay browse --at TIME` browses the archive as at TIME, as `replay serve --at` does: the docs
send people there to see what a recorded session saw (Streamlit's socket, which a crawl's
conversation answers otherwise and the first keystroke parts from); the option did not exist."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

URL = "http://at.test/"
CRAWL, SESSION = "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("at") / "at.wfz"
    with new_archive_atomically(path) as arc:
        for kind, when, text in (("crawl", CRAWL, b"as the crawl saw it"), ("session", SESSION, b"as the session saw it")):
            sid = arc.new_session(kind, source="test_replay_browse_at")
            arc.add_exchange(Exchange(url=URL, captured_at=when, status=200, reason="OK", session_id=sid,
                                      resp_headers=[("Content-Type", "text/html")], payload=text))
    return path


def _status(port: int) -> dict:
    import json

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_webfreeze/status", timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("mode", ["proxy", "direct"])
def test_browse_at_a_time_answers_with_the_captures_nearest_it(archive, mode, tmp_path):
    import os

    got = {}
    for when in (CRAWL, SESSION):
        proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "replay", "browse", str(archive), "--mode", mode,
                                 "--at", when, "--headless"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                text=True, env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")))
        try:
            head = "".join(proc.stderr.readline() for _ in range(3))
            port = int(re.search(r"at http://127\.0\.0\.1:(\d+)", head).group(1))
            opened = re.search(r"opened (\S+)", head).group(1)
            deadline = time.monotonic() + 90
            while _status(port)["requests"] < 1:  # (the browser is up: it asked for its page)
                assert time.monotonic() < deadline and proc.poll() is None, "the browser asked for nothing"
                time.sleep(0.2)
            if mode == "proxy":
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{port}"}))
                answer = opener.open(URL, timeout=60).read()
                try:  # (a miss: listed when the browse stops, as a person saw it missing)
                    opener.open(URL + "missing.png", timeout=60)
                except urllib.error.HTTPError as exc:
                    assert exc.code == 404
            else:
                answer = urllib.request.urlopen(opened, timeout=60).read()
            got[when] = (opened, answer)
        finally:
            proc.send_signal(signal.SIGTERM)
            err = proc.communicate(timeout=30)[1]
        assert proc.returncode == 0, err
        if mode == "proxy":
            assert f"  missed: GET {URL}missing.png\n" in err, err
    # (the page as captured, after the runtime the replay puts in front of an HTML page)
    assert [a.rsplit(b">", 1)[-1] for _, a in got.values()] == [b"as the crawl saw it", b"as the session saw it"]
    if mode == "direct":  # (the page it opened is at that time)
        assert [re.sub(r"^http://127\.0\.0\.1:\d+", "", o) for o, _ in got.values()] == [
            "/20260101100000/" + URL, "/20260101110000/" + URL], got
    else:
        assert [o for o, _ in got.values()] == [URL, URL]


def test_a_sigterm_as_the_browser_starts_leaves_no_browser_behind(archive, tmp_path):
    """SIGTERM right after the browser's command line is printed: it came while the browser was
    being started, which left it running (its profile too) and the command exited 143."""
    import os
    from pathlib import Path

    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "replay", "browse", str(archive), "--headless"],
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")))
        head = "".join(proc.stderr.readline() for _ in range(3))
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
        profile = re.search(r"--user-data-dir=(\S+)", head).group(1)
        left = subprocess.run(["pgrep", "-f", "--", f"--user-data-dir={profile}"], capture_output=True, text=True).stdout
        subprocess.run(["pkill", "-f", "--", f"--user-data-dir={profile}"])
        assert (proc.returncode, left.strip()) == (0, ""), (proc.returncode, left, err)
        assert not Path(profile).exists()
