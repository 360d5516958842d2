"""A crawl whose pages miss only requests to a name that does not resolve from the recording
machine (Verdaccio 6's Gravatar avatars, recorded offline) says so, instead of offering a
``--recheck`` that, run as printed on the same machine, cannot repair it."""

from __future__ import annotations

import pytest
from static_site import static_site

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

AVATAR = "http://avatars.invalid/avatar/82a2"  # (.invalid never resolves: RFC 2606)
PAGE = (f'<!doctype html><html><head><title>Registry</title></head><body><h1>tiny-color</h1>'
        f'<img alt="W" width="40" height="40" src="{AVATAR}"><a href="/two">two</a></body></html>').encode()


@pytest.fixture
def site():
    with static_site({"*": PAGE}) as port:
        yield port


def test_misses_on_a_name_that_does_not_resolve_are_said_so(tmp_path, monkeypatch, cli, site):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    r = cli("record", "crawl", "http://reg.test/", "--resolve", f"reg.test=127.0.0.1:{site}",
            "--archive", tmp_path / "reg.wfz", "--depth", "1", timeout=300)
    assert r.returncode == 3, r.stdout + r.stderr  # (still incomplete: the avatar is not in the archive)
    assert r.stdout.count(f"(missing: {AVATAR} (") == 2, r.stdout
    assert "repair with:" not in r.stderr, r.stderr
    assert ("2 pages miss only requests to names that do not resolve from this machine (avatars.invalid): "
            "the recording could not reach them, and a --recheck here cannot either") in r.stderr, r.stderr
