"""Live runs on a site behind HTTP authentication (``bench run --live --http-credentials``): the
environment's browser answers the site's 401 challenge with the credentials the run was given
(they reach it in the upstream settings, never in a file), and without them it stays on the 401.
Trac's ``/login`` behind ``tracd --basic-auth`` (the test bed), through a live recording proxy."""

from __future__ import annotations

import pytest

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:  # `make test` installs it; a bare checkout may not have it
    pytestmark = pytest.mark.skip(reason=str(exc))

TRAC = "http://trac.testbed.test/"


def _episode(tmp_path, app, credentials):
    """One reset on Trac's /login in a live environment: (the URL it ended on, its text, the archive's
    (URL, status) of /login and /)."""
    from webfreeze.recorder.live import live_ca_file, live_proxy
    from webfreeze.simulator.env import EnvConfig, WebEnv

    tmp_path.mkdir(parents=True, exist_ok=True)
    archive = tmp_path / "live.wfz"
    with live_proxy(archive, resolve={app.host: ("127.0.0.1", app.port)}) as proxy:
        upstream = {"proxy": proxy.url, "ca_file": live_ca_file(), "mode": "live"}
        if credentials:
            upstream["http_credentials"] = credentials
        env = WebEnv(EnvConfig(str(archive), backend="browser", upstream=upstream))
        try:
            obs, _ = env.reset(options={"task": {"id": "login", "start_url": TRAC + "login", "instruction": "log in"}})
            url, text = env.backend.url, obs["axtree_text"]
        finally:
            env.close()
    with Archive.open(archive) as arc:
        got = [(e.url, e.status) for e in arc.exchanges() if e.url in (TRAC, TRAC + "login")]
    return url, text, got


@pytest.mark.slow  # (Trac, a live proxy and Chromium: most of a minute on 2 shared cores)
def test_a_live_episode_answers_the_sites_challenge(tmp_path, testbed, monkeypatch):
    from testbed.trac_app import TRAC_PASSWORD, TRAC_USER

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    app = testbed.app("trac")
    url, text, got = _episode(tmp_path / "with", app, {"username": TRAC_USER, "password": TRAC_PASSWORD})
    assert url == TRAC and "'logged in as'" in text and f"'{TRAC_USER}'" in text
    assert got == [(TRAC + "login", 401), (TRAC + "login", 302), (TRAC, 200)]  # challenged, answered, let in

    url, text, got = _episode(tmp_path / "without", app, None)
    assert url == TRAC + "login" and "logged in as" not in text and got == [(TRAC + "login", 401)]
