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

import http.server
import json
import os
import threading

import pytest

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


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGE.encode() if self.path == "/" else b"not found"
        self.send_response(200 if self.path == "/" else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_dropdown_choice_is_the_combobox_and_the_option_clicked_and_replays(tmp_path, cli):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}/"
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp_path / "home"))
    (tmp_path / "planet.py").write_text(SCRIPT)
    try:
        r = cli("record", "session", site, "--archive", tmp_path / "planets.wfz", "--trajectory",
                tmp_path / "planet.json", "--script", tmp_path / "planet.py", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    steps = [s for s in json.loads((tmp_path / "planet.json").read_text())["steps"] if s["action"] != "scroll"]
    clicks = [(s["target"]["role"], s["target"]["name"]) for s in steps if s["action"] == "click"]
    assert clicks == [("combobox", "Planet"), ("option", "Mars"), ("button", "Greet")], steps
    suite = tmp_path / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp_path / "planet.json", "--answer", "1.52", "--id", "planet",
            "--instruction", "How far from the sun does Mars orbit?", "--archive", tmp_path / "planets.wfz")
    assert r.returncode == 0, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", "--out", tmp_path / "v", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["expired"] == [] and report["incomplete"] == [], report
