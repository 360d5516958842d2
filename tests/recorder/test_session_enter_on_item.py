"""`record session` logs Enter on a focused element the browser does not click for it as a press on
that element: JupyterLab's file browser opens the focused file on Enter (a keydown handler on a
list item), and the session logged nothing but the navigation that followed, so its task could not
validate. Enter on a focused button is still its click, once."""

from __future__ import annotations

import pytest
from session_task import record_session, validate_as_task

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = """<!doctype html><html><head><title>Files</title></head><body><h1>Files</h1>
<ul id="files"><li tabindex="0" id="rain">rainfall.ipynb</li><li tabindex="0" id="st">stations.csv</li></ul>
<button id="count" onclick="document.getElementById('shown').textContent = 'Files: 2'">Count</button>
<p id="out">Nothing open.</p><p id="shown">Files: ?</p>
<script>
  document.getElementById('files').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') document.getElementById('out').textContent = 'Opened ' + e.target.textContent + ': total 130 mm';
  });
</script></body></html>"""
SCRIPT = '''
from webfreeze.recorder.session import record_answer
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_role("button", name="Count").focus()
    page.keyboard.press("Enter")
    page.get_by_text("Files: 2").wait_for()
    page.locator("#rain").click()
    page.keyboard.press("Enter")
    page.get_by_text("Opened rainfall.ipynb: total 130 mm").wait_for()
    record_answer(page, "130 mm", evidence=["Opened rainfall.ipynb: total 130 mm"])
'''


def test_enter_on_a_focused_list_item_is_a_press_and_the_task_validates(cli, tmp_path):
    steps = record_session(cli, tmp_path, PAGE, SCRIPT, "files")
    acts = [(s["action"], (s.get("target") or {}).get("text"), s.get("value")) for s in steps
            if s["action"] in ("click", "press")]
    assert acts == [("click", "Count", None), ("click", "rainfall.ipynb", None),
                    ("press", "rainfall.ipynb", "Enter")], steps
    validate_as_task(cli, tmp_path, "files", "130 mm", "What is the total rainfall?")


SHADOW = """<!doctype html><html><head><title>Cart</title></head><body><h1>Cart</h1>
<add-button></add-button><p id="n">In the cart: 0</p>
<script>
  customElements.define('add-button', class extends HTMLElement {
    constructor() {
      super();
      const root = this.attachShadow({mode: 'closed'});
      root.innerHTML = '<button>Add to cart</button>';
      root.querySelector('button').addEventListener('click', () => {
        const n = document.getElementById('n');
        n.textContent = 'In the cart: ' + (Number(n.textContent.split(': ')[1]) + 1);
      });
    }
  });
</script></body></html>"""
SHADOW_SCRIPT = '''
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.keyboard.press("Tab")  # (into the closed root: no locator reaches its button)
    page.keyboard.press("Enter")
    page.get_by_text("In the cart: 1").wait_for()
'''


def test_enter_on_a_button_in_a_closed_shadow_root_is_its_click_once(cli, tmp_path):
    """The window hears the key on the custom element (its root is closed); the browser's click on
    the button inside is logged on it too. One step, the click, not a press and a click (replayed,
    the item would go into the cart twice)."""
    steps = record_session(cli, tmp_path, SHADOW, SHADOW_SCRIPT, "cart")
    acts = [(s["action"], (s.get("target") or {}).get("tag")) for s in steps if s["action"] in ("click", "press")]
    assert acts == [("click", "add-button")], steps
