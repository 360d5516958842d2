"""Bokeh on the test bed (docs/testbed.md): a static site whose widgets, data table and tabs Bokeh 3
draws as web components, in open shadow roots. What it draws there is recorded (the crawl's DOM
snapshots keep the shadow roots), replayed exactly (`replay check`: no miss, the captured text), and
is a page an agent sees and acts on: the reference sessions, which choose in a select and click a
tab inside shadow roots and answer from a table cell and a tab panel there, validate in the browser
backend, and the site sees no request meanwhile."""

from __future__ import annotations

import json

import pytest

from testbed.fixtures import webfreeze
from webfreeze.archives import Archive
from webfreeze.checks.replay_check import visible_text
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))


def test_the_crawl_keeps_what_bokeh_draws_and_replays_it_exactly(testbed, tmp_path):
    from exact_replay import inexact_pages, replay_check

    archive, app = testbed.crawl("bokeh"), testbed.app("bokeh")
    assert "(complete)" in testbed.crawl_output["bokeh"], testbed.crawl_output["bokeh"]
    with Archive.open(archive) as arc:
        pages = {p.url: p for p in arc.pages()}
        assert sorted(pages) == [app.base_url + p for p in ("index.html", "stock.html", "tabs.html")]
        stock = pages[app.base_url + "stock.html"]
        dom = stock.dom().decode("utf-8")
    assert stock.extra.get("shadow_roots") is True and '<template shadowrootmode="open">' in dom
    # the table's text is in its shadow roots alone
    assert "Cobalt kettle" in visible_text(dom) and "Cobalt kettle" not in visible_text(dom, shadow=False)
    mark = app.mark()
    report = replay_check(archive, tmp_path / "check", "proxy", testbed.home)
    assert app.requests_since(mark) == []  # the leak canary
    assert report["summary"]["pages"] == 3 and inexact_pages(report) == [], report["summary"]


def test_tasks_answered_inside_shadow_roots_validate_in_the_browser(testbed, tmp_path):
    suite, app = testbed.suite("bokeh"), testbed.app("bokeh")
    steps = json.loads((suite / "references" / "bokeh-blue-item.json").read_text())["steps"]
    assert [s["action"] for s in steps] == ["navigate", "click", "navigate", "select", "answer"], steps
    assert steps[3]["target"]["tag"] == "select" and steps[3]["value"]["label"] == "South", steps[3]
    tab = json.loads((suite / "references" / "bokeh-caravan-town.json").read_text())["steps"][3]
    assert tab["action"] == "click" and tab["target"]["text"] == "Caravans" and " > " in tab["target"]["css"], tab
    mark = app.mark()
    r = webfreeze("tasks", "validate", suite, "--json", "--out", tmp_path / "v", home=testbed.home)
    assert app.requests_since(mark) == []
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["backend"] == "browser" and result["tasks"] == 2 and result["expired"] == [], result
    blue = json.loads((tmp_path / "v" / "trajectories" / "bokeh-blue-item.json").read_text())["steps"]
    assert [s["action"].split("(")[0] for s in blue] == ["click", "select_option", "send_msg_to_user"], blue
