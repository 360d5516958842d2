"""`record session` names the element clicked, not a landmark around it, and logs a double-click as
one `dblclick` step (it was two clicks, which opened nothing when replayed: JupyterLab opens a file
on a double-click): JupyterLab's file browser
draws its files as list items with no role of their own inside a `role="region"` panel, and a click
on a file was logged as a click on `region 'side panel content'` (the nearest element with a role),
which the reference agent then clicked in its middle. A landmark or a structural role (region,
main, navigation, list, group, ...) is no click target: the element under the pointer is."""

from __future__ import annotations

import pytest
from session_task import record_session, validate_as_task

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

ROWS = "".join(f'<li class="item"><span class="icon"></span><span class="name"><span>{name}</span></span>'
               f'<span class="date">2 minutes ago</span></li>'
               for name in ["data", "notes.md", "rainfall.ipynb", "stations.csv", "zz-archive"])
PAGE = f"""<!doctype html><html><head><title>Lab</title><style>
.panel {{ width: 400px; height: 600px; border: 1px solid #999; }} .item {{ padding: 4px; cursor: pointer; }}
.item.selected {{ background: #cde; }} ul {{ list-style: none; padding: 0; margin: 0; }}
</style></head><body>
<div class="panel" role="region" aria-label="side panel content"><ul class="listing">{ROWS}</ul></div>
<p id="out">Nothing selected.</p>
<script>
  document.querySelector('.listing').addEventListener('click', (e) => {{
    const li = e.target.closest('li');
    if (!li) return;
    document.querySelectorAll('.item').forEach((x) => x.classList.toggle('selected', x === li));
    document.getElementById('out').textContent = 'Selected ' + li.querySelector('.name').textContent;
  }});
</script></body></html>"""
SCRIPT = '''
from webfreeze.recorder.session import record_answer
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_text("stations.csv").click()
    page.get_by_text("Selected stations.csv").wait_for()
    record_answer(page, "stations.csv", evidence=["Selected stations.csv"])
'''


def test_a_click_in_a_region_names_what_was_clicked(cli, tmp_path):
    steps = record_session(cli, tmp_path, PAGE, SCRIPT, "lab")
    [click] = [s for s in steps if s["action"] == "click"]
    assert click["target"]["role"] != "region" and click["target"]["text"] == "stations.csv", click
    validate_as_task(cli, tmp_path, "lab", "stations.csv", "Select the stations file.")


DOUBLE = PAGE.replace("addEventListener('click',", "addEventListener('dblclick',").replace("'Selected '", "'Opened '")
DOUBLE_SCRIPT = '''
from webfreeze.recorder.session import record_answer
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_text("stations.csv").dblclick()
    page.get_by_text("Opened stations.csv").wait_for()
    record_answer(page, "stations.csv", evidence=["Opened stations.csv"])
'''


def test_a_double_click_is_one_step_and_replays(cli, tmp_path):
    steps = record_session(cli, tmp_path, DOUBLE, DOUBLE_SCRIPT, "dbl")
    acts = [(s["action"], s["target"]["text"]) for s in steps if s["action"] in ("click", "dblclick")]
    assert acts == [("dblclick", "stations.csv")], steps
    validate_as_task(cli, tmp_path, "dbl", "stations.csv", "Open the stations file.")
