"""A click on a nameless label among others (Streamlit's radio options: each a ``label`` with no
name of its own, in a group whose id a script made up, so another in the replay) is found again by
the reference agent by the text it showed: the session's task is reachable in the browser backend.
"""

from __future__ import annotations

import pytest
from session_task import record_session, validate_as_task

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = """<!doctype html><html><head><title>Contact</title><style>
.opt input { position: absolute; opacity: 0; width: 1px; height: 1px; }
.opt { display: block; padding: 4px; }
</style></head><body><h1>Contact</h1><div id="slot"></div><p id="out">No choice yet</p>
<script>
  // a widget library's group, under an id of its own making (random: another in the replay)
  const group = document.createElement('div');
  group.id = 'radio-' + Math.random().toString(36).slice(2, 10);
  group.setAttribute('role', 'radiogroup');
  group.setAttribute('aria-label', 'Contact');
  for (const [value, text] of [['email', 'Email'], ['phone', 'Phone'], ['post', 'Post']]) {
    const label = document.createElement('label');
    label.className = 'opt';
    label.innerHTML = `<input type="radio" name="c" value="${value}"><div>${text}</div>`;
    group.appendChild(label);
  }
  document.getElementById('slot').appendChild(group);
  group.addEventListener('change', (e) => {
    document.getElementById('out').textContent = 'You chose ' + e.target.value;
  });
</script></body></html>"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_text("Phone").click()
    page.get_by_text("You chose phone").wait_for()
    record_answer(page, "phone", evidence=["You chose phone"])
'''


def test_a_click_on_one_of_several_nameless_labels_replays(tmp_path, cli):
    steps = record_session(cli, tmp_path, PAGE, SCRIPT, "contact")
    (click,) = [s for s in steps if s["action"] == "click"]
    assert (click["target"]["role"], click["target"]["name"], click["target"]["text"]) == ("LabelText", "", "Phone")
    validate_as_task(cli, tmp_path, "contact", "phone", "Choose to be contacted by phone.")
