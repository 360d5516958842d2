"""A click whose effect depends on where it lands in its element (a slider's track: Shiny's range
slider moves its handle to the point clicked) keeps where: ``at``, the fractions of the element's
width and height, when the click landed away from its middle on an element that is no control. The
reference agent clicks that point of the element as it is laid out now (``mouse_click(x, y)``),
where it clicked the middle, and the slider took another value (11 for the person's 16). A track
below the fold is hovered first (which scrolls it into view): a point of an element out of view
cannot be clicked."""

from __future__ import annotations

import pytest
from session_task import record_session, validate_as_task

from webfreeze.eval.trajectory import Action, agent_action, session_actions
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = """<!doctype html><html><head><title>Price</title><style>
#track { position: relative; width: 400px; height: 12px; margin: 40px; background: #ccc; cursor: pointer; }
#handle { position: absolute; top: -4px; width: 12px; height: 20px; background: #36c; }
</style></head><body><h1>Price</h1>
<div id="track"><span id="handle"></span></div><p id="out">Value: 0</p><button id="ok">OK</button>
<script>
  const track = document.getElementById('track');
  track.addEventListener('click', (e) => {
    const r = track.getBoundingClientRect();
    const v = Math.round((e.clientX - r.left) / r.width * 20);
    document.getElementById('handle').style.left = (v * 20 - 6) + 'px';
    document.getElementById('out').textContent = 'Value: ' + v;
  });
  document.getElementById('ok').addEventListener('click', () => { document.getElementById('out').textContent += ' (kept)'; });
</script></body></html>"""
SCRIPT = '''
from webfreeze.recorder.session import record_answer
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.locator("#track").scroll_into_view_if_needed()
    box = page.locator("#track").bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.75, box["y"] + box["height"] / 2)
    page.get_by_text("Value: 15").wait_for()
    page.get_by_role("button", name="OK").click()
    page.get_by_text("Value: 15 (kept)").wait_for()
    record_answer(page, "15", evidence=["Value: 15 (kept)"])
'''


@pytest.mark.parametrize("below", [0, 2000], ids=["in-view", "below-the-fold"])
def test_a_click_on_a_track_keeps_where_it_landed_and_replays_there(cli, tmp_path, below):
    page = PAGE.replace("margin: 40px;", f"margin: {40 + below}px 40px 40px;")
    steps = record_session(cli, tmp_path, page, SCRIPT, "price")
    track, ok = [s for s in steps if s["action"] == "click"]
    assert track["at"][0] == pytest.approx(0.75, abs=0.01) and track["at"][1] == pytest.approx(0.5, abs=0.1), track
    assert "at" not in ok  # (a button: where it landed does not matter)
    # compared by kind, as a drag is: the reference's click at a point and an agent's mouse_click
    assert session_actions({"steps": [track]}) == [Action("click", "")]
    assert agent_action({"parsed": {"kind": "mouse_click", "x": 1, "y": 2}}) == Action("click", "")
    validate_as_task(cli, tmp_path, "price", "15", "Set the price to 15 and keep it.")
