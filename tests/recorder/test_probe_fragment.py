"""A start URL with a fragment (a hash-routed application's page, ``http://app.test/#/experiments``):
the fragment is the browser's, never sent to the server. The reachability check of ``record crawl``
and ``record session`` sent it in the request target, and a server that does not drop it itself
(MLflow 3's) answered 404: the crawl stopped before it began, "the site answered 404 Not Found"."""

from __future__ import annotations

import pytest
from static_site import static_site

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = b"<!doctype html><html><head><title>Runs</title></head><body><h1>Experiments</h1></body></html>"


def test_a_start_url_with_a_fragment_is_asked_for_without_it(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    with static_site({"/": PAGE}) as port:  # (any other request target, "/#/experiments" too: 404)
        r = cli("record", "crawl", "http://spa.test/#/experiments", "--resolve", f"spa.test=127.0.0.1:{port}",
                "--archive", tmp_path / "spa.wfz", "--depth", "0", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
