"""The reference agent waits, as the person did, for what a page shows late: JupyterLab's file
browser lists its files after a timer longer than the environment's settle (a second of virtual
time), and the person's session waited for them. The agent said "the pages did not show
'stations.csv'" at once, and the task could never validate. Now, once per step whose target or
evidence is not there yet, it waits (``noop``) as long as the person took before that step, then
tries again; a page that already shows it is replayed without a wait, as before."""

from __future__ import annotations

import json

import pytest
from session_task import record_session, validate_as_task

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = """<!doctype html><html><head><title>Files</title></head><body><h1>Files</h1>
<ul id="files"></ul><button id="open" hidden>Open stations.csv</button><p id="out"></p>
<script>
  setTimeout(() => {
    for (const name of ['rainfall.ipynb', 'stations.csv']) {
      const li = document.createElement('li'); li.textContent = name; files.append(li);
    }
    document.getElementById('open').hidden = false;
  }, 2500);
  document.getElementById('open').addEventListener('click', () => { out.textContent = 'Stations: 3'; });
</script></body></html>"""
SCRIPT = '''
from webfreeze.recorder.session import record_answer
def run(page):
    page.get_by_text("stations.csv", exact=True).wait_for()
    page.get_by_role("button", name="Open stations.csv").click()
    page.get_by_text("Stations: 3").wait_for()
    record_answer(page, "3", evidence=["Stations: 3"])
'''


def test_the_reference_agent_waits_as_the_person_did(cli, tmp_path):
    steps = record_session(cli, tmp_path, PAGE, SCRIPT, "late")
    assert [s["action"] for s in steps] == ["navigate", "click", "answer"], steps
    validate_as_task(cli, tmp_path, "late", "3", "How many stations are there?")
    traj = json.loads((tmp_path / "v" / "trajectories" / "late.json").read_text())
    actions = [s["action"] for s in traj["steps"]]
    assert actions[0].startswith("noop(") and actions[1].startswith("click(") and len(actions) == 3, actions
    waited = int(actions[0][5:-1])
    assert 2000 <= waited <= 60_000, actions  # (as long as the person took: at least the page's 2.5 s)
