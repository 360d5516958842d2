"""A click on a nameless label among others (Streamlit's radio options: each a ``label`` with no
name of its own, in a group whose id a script made up, so another in the replay) is found again by
the reference agent by the text it showed: the session's task is reachable in the browser backend.
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


def test_a_click_on_one_of_several_nameless_labels_replays(tmp_path, cli):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}/"
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp_path / "home"))
    (tmp_path / "contact.py").write_text(SCRIPT)
    try:
        r = cli("record", "session", site, "--archive", tmp_path / "contact.wfz", "--trajectory",
                tmp_path / "contact.json", "--script", tmp_path / "contact.py", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    steps = json.loads((tmp_path / "contact.json").read_text())["steps"]
    (click,) = [s for s in steps if s["action"] == "click"]
    assert (click["target"]["role"], click["target"]["name"], click["target"]["text"]) == ("LabelText", "", "Phone")
    suite = tmp_path / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp_path / "contact.json", "--answer", "phone", "--id", "contact",
            "--instruction", "Choose to be contacted by phone.", "--archive", tmp_path / "contact.wfz")
    assert r.returncode == 0, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", "--out", tmp_path / "v", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["expired"] == [] and report["incomplete"] == [], report
