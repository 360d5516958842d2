"""`record session` logs a choice made in a script-drawn dropdown (a combobox), as Gradio's
``gr.Dropdown`` draws it: an ``<input role="combobox">`` whose click opens a list of
``<li role="option">``, an option chosen on ``mousedown``, which removes the list at once.

1. The click on the combobox is a step: it is what opens the list (a click in a plain text field
   is not, its typing says what happened).
2. The click on the option is logged as the option's: the browser dispatches that click to the
   common ancestor of the press (the option, gone by then) and the release (what lay under it
   once the list closed), a panel the person never aimed at.

The session becomes a task that ``tasks validate`` reaches in the browser backend: the reference
agent opens the list, picks the option, and the page shows the answer.
"""

from __future__ import annotations

import pytest
from session_task import record_session, validate_as_task

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = """<!doctype html><html><head><title>Planets</title><style>
#wrap { position: relative; width: 300px; }
#options { position: absolute; top: 30px; left: 0; margin: 0; padding: 0; list-style: none;
           background: #fff; border: 1px solid #999; width: 300px; z-index: 2; }
#options li { height: 24px; }
textarea { width: 300px; height: 160px; }
</style></head><body><div role="tabpanel" id="panel"><h1>Planets</h1>
<div id="wrap"><input role="combobox" aria-label="Planet" aria-expanded="false" aria-controls="options"
  autocomplete="off" value="Earth"></div>
<textarea aria-label="Notes"></textarea>
<button id="go">Greet</button><p id="out"></p></div>
<script>
  const AU = {Mercury: '0.39', Venus: '0.72', Earth: '1.0', Mars: '1.52'};
  const box = document.querySelector('[role=combobox]');
  const close = () => { const l = document.getElementById('options'); if (l) l.remove();
                        box.setAttribute('aria-expanded', 'false'); };
  box.addEventListener('focus', () => {
    if (document.getElementById('options')) return;
    const list = document.createElement('ul');
    list.id = 'options';
    list.setAttribute('role', 'listbox');
    for (const name of Object.keys(AU)) {
      const li = document.createElement('li');
      li.setAttribute('role', 'option');
      li.textContent = name;
      // chosen on the press, as Gradio's dropdown does: the list is gone before the release
      li.addEventListener('mousedown', () => { box.value = name; close(); box.blur(); });
      list.appendChild(li);
    }
    document.getElementById('wrap').appendChild(list);
    box.setAttribute('aria-expanded', 'true');
  });
  box.addEventListener('blur', () => setTimeout(close, 0));
  document.getElementById('go').addEventListener('click', () => {
    document.getElementById('out').textContent = box.value + ' orbits at ' + AU[box.value] + ' AU.';
  });
</script></body></html>"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_role("combobox", name="Planet").click()
    page.get_by_role("option", name="Mars").click()
    page.get_by_role("button", name="Greet").click()
    page.get_by_text("Mars orbits at 1.52 AU.").wait_for()
    record_answer(page, "1.52", evidence=["Mars orbits at 1.52 AU."])
'''


def test_a_dropdown_choice_is_the_combobox_and_the_option_clicked_and_replays(tmp_path, cli):
    steps = [s for s in record_session(cli, tmp_path, PAGE, SCRIPT, "planet") if s["action"] != "scroll"]
    clicks = [(s["target"]["role"], s["target"]["name"]) for s in steps if s["action"] == "click"]
    assert clicks == [("combobox", "Planet"), ("option", "Mars"), ("button", "Greet")], steps
    validate_as_task(cli, tmp_path, "planet", "1.52", "How far from the sun does Mars orbit?")
