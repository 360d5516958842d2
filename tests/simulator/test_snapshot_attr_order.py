"""A step's DOM snapshot must not depend on when the page's script set an attribute relative to
the observation that stamped the element's bid: ag-grid (MLflow's runs table) sets the cells'
``style`` a frame after they are inserted, and whether an observation stamped them first changed
the snapshot's bytes (``style`` before or after ``data-wf-bid``), so a bundle re-ran to a
different run (``trajectory ... differs at steps[1].dom``)."""

from __future__ import annotations

import re

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://grid.test"
# The same grid twice: its cell's style set by a script before the page is observed, or after (the
# button: a cell drawn late, as ag-grid draws them).
EARLY = """<!DOCTYPE html><html><head><title>Grid</title></head><body>
<div id="cell" class="ag-cell" role="gridcell">0.9839</div>
<button type="button" id="go">size</button>
<script>document.getElementById('cell').setAttribute('style', 'height: 64px;');</script>
</body></html>"""
LATE = """<!DOCTYPE html><html><head><title>Grid</title></head><body>
<div id="cell" class="ag-cell" role="gridcell">0.9839</div>
<button type="button" id="go" onclick="document.getElementById('cell').setAttribute('style', 'height: 64px;')">size</button>
</body></html>"""


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("grid") / "grid.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_snapshot_attr_order")
        for rel, html in (("/early", EARLY), ("/late", LATE)):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                      payload=html.encode(), session_id=sid))
    return path


def _cell(snapshot: bytes) -> str:
    return re.search(rb'<div id="cell"[^>]*>', snapshot).group(0).decode()


def test_an_attribute_set_after_the_bid_serialises_as_one_set_before(archive):
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        env.reset(options={"task": {"id": "early", "start_url": SITE + "/early", "instruction": "look"}})
        early = _cell(env.tree.snapshot)
        env.reset(options={"task": {"id": "late", "start_url": SITE + "/late", "instruction": "look"}})
        bid = next(e["bid"] for e in env.tree.descriptions if e["role"] == "button" and e["name"] == "size")
        obs, *_ = env.step(f"click('{bid}')")
        assert obs["last_action_error"] == ""
        late = _cell(env.tree.snapshot)
    finally:
        env.close()
    assert 'style="height: 64px;"' in late  # the script ran, after the bid was stamped
    assert early == late
    # the page's own attributes in their order, then the environment's
    assert re.fullmatch(r'<div id="cell" class="ag-cell" role="gridcell" style="height: 64px;" data-wf-bid="\d+">',
                        late), late
