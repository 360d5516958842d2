"""``replay check --rules FILE`` checks under matching-rule overrides, as ``replay serve --rules``
serves (a person trying rules had to edit a copy of the archive's metadata), and the report says
which. The page here asks JupyterLab's way, a bare epoch as the query (``data.json?1796588621569``,
a new one per load): the default rules drop it and the replay answers; without that rule (and no
fuzzy answer) the request misses."""

from __future__ import annotations

import json

import pytest
from static_site import static_site

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = (b'<!doctype html><html><head><title>Lab</title></head><body><h1>Lab</h1><p id=out>loading</p><script>'
        b'fetch("data.json?" + Date.now()).then((r) => r.json()).then((d) => { out.textContent = d.text; });'
        b'</script></body></html>')


def test_rules_from_a_file_are_used_and_reported(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    archive = tmp_path / "lab.wfz"
    with static_site({"/": PAGE, "/data.json": (b'{"text": "Total: 130 mm"}', "application/json")}) as port:
        r = cli("record", "crawl", "http://lab.test/", "--resolve", f"lab.test=127.0.0.1:{port}",
                "--archive", archive, "--depth", "0", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("replay", "check", archive, "--report", tmp_path / "default", timeout=300)
    assert r.returncode == 0 and "0 with misses" in r.stdout, r.stdout + r.stderr
    report = json.loads((tmp_path / "default" / "report.json").read_text())
    assert "rules" not in report and report["pages"][0]["text_similarity"] == 1.0, report
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"drop_epoch_keys": False, "fuzzy_threshold": 1.0}))
    r = cli("replay", "check", archive, "--report", tmp_path / "strict", "--rules", rules, timeout=300)
    assert r.returncode == 1 and "1 with misses (1 request)" in r.stdout, r.stdout + r.stderr
    report = json.loads((tmp_path / "strict" / "report.json").read_text())
    assert report["rules"] == {"drop_epoch_keys": False, "fuzzy_threshold": 1.0}, report
    [missed] = report["pages"][0]["misses"]
    assert missed.startswith("http://lab.test/data.json?"), missed
    rules.write_text('{"drop_epoch_keys": "no"}')
    r = cli("replay", "check", archive, "--report", tmp_path / "bad", "--rules", rules, timeout=300)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
