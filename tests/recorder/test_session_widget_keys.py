"""`record session` logs the keys a focused widget takes for itself as ``press`` steps: a slider
moved by its arrow keys (Streamlit's, BaseWeb's ``role="slider"``), whose script prevents the
scroll the keys would make. An arrow key the page leaves alone scrolls the page, as before, and is
no press. The session becomes a task that ``tasks validate`` reaches in the browser backend: the
reference agent presses the same keys on the slider, and the page shows the answer.
"""

from __future__ import annotations

import pytest
from session_task import record_session, validate_as_task

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = """<!doctype html><html><head><title>Fruit stand</title><style>
#track { width: 300px; height: 8px; background: #ccc; position: relative; margin: 20px 0; }
#thumb { width: 16px; height: 16px; background: #36c; position: absolute; top: -4px; left: 0; }
#tall { height: 3000px; }
</style></head><body><h1>Fruit stand</h1>
<p id="label">Quantity</p>
<div id="track"><div id="thumb" role="slider" tabindex="0" aria-labelledby="label" aria-valuemin="1"
  aria-valuemax="10" aria-valuenow="1"></div></div>
<p id="out">Total: 1 x 3.20 = 3.20</p><div id="tall"></div>
<script>
  const thumb = document.getElementById('thumb');
  const show = (n) => {
    thumb.setAttribute('aria-valuenow', String(n));
    thumb.style.left = (n - 1) * 30 + 'px';
    document.getElementById('out').textContent = `Total: ${n} x 3.20 = ${(n * 3.2).toFixed(2)}`;
  };
  thumb.addEventListener('keydown', (e) => {
    const n = Number(thumb.getAttribute('aria-valuenow'));
    const next = {ArrowRight: n + 1, ArrowUp: n + 1, ArrowLeft: n - 1, ArrowDown: n - 1, Home: 1, End: 10}[e.key];
    if (next === undefined) return;
    e.preventDefault();  // (the slider's key, not the page's scroll)
    e.stopPropagation();
    show(Math.min(10, Math.max(1, next)));
  });
</script></body></html>"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.keyboard.press("ArrowDown")  # (the page's: nothing focused, it scrolls)
    page.wait_for_function("window.scrollY > 0")
    page.evaluate("window.scrollTo(0, 0)")
    page.get_by_role("slider", name="Quantity").focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.get_by_text("Total: 4 x 3.20 = 12.80").wait_for()
    record_answer(page, "12.80", evidence=["Total: 4 x 3.20 = 12.80"])
'''


def test_a_sliders_arrow_keys_are_presses_on_it_and_replay(tmp_path, cli):
    steps = record_session(cli, tmp_path, PAGE, SCRIPT, "price")
    presses = [(s["target"] and (s["target"]["role"], s["target"]["name"]), s["value"])
               for s in steps if s["action"] == "press"]
    assert presses == [(("slider", "Quantity"), "ArrowRight")] * 3, steps
    assert any(s["action"] == "scroll" for s in steps), steps  # the page's own ArrowDown: a scroll
    validate_as_task(cli, tmp_path, "price", "12.80", "What do four pieces of fruit cost?")


# A field whose page acts when the person leaves it (a blur or change handler: form validation,
# Mesop's on_blur), left with Tab, and nothing clicked after: the Tab is what made the page answer.
BLUR_PAGE = """<!doctype html><html><head><title>Greeter</title></head><body><h1>Greeter</h1>
<label>Your name <input id="name"></label> <button type="button">Clear</button>
<p id="out">Nobody yet</p>
<script>
  const name = document.getElementById('name');
  name.addEventListener('change', () => { document.getElementById('out').textContent = 'Hello, ' + name.value + '!'; });
</script></body></html>"""

BLUR_SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    box = page.get_by_role("textbox", name="Your name")
    box.fill("Ada")
    box.press("Tab")
    page.get_by_text("Hello, Ada!").wait_for()
    box.focus()
    box.press("Shift+Tab")  # (back out of it again: nothing changed, the page says nothing)
    record_answer(page, "Hello, Ada!", evidence=["Hello, Ada!"])
'''


def test_a_tab_out_of_a_field_is_a_press_on_it_and_replays(tmp_path, cli):
    steps = record_session(cli, tmp_path, BLUR_PAGE, BLUR_SCRIPT, "greet")
    logged = [(s["action"], s["target"] and (s["target"]["role"], s["target"]["name"]), s.get("value"))
              for s in steps if s["action"] in ("type", "press", "click")]
    assert logged == [("type", ("textbox", "Your name"), "Ada"), ("press", ("textbox", "Your name"), "Tab"),
                      ("press", ("textbox", "Your name"), "Shift+Tab")], steps
    validate_as_task(cli, tmp_path, "greet", "Hello, Ada!", "What does the page say to Ada?")
