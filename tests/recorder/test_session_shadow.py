"""`record session` logs what a person does inside web components (open shadow roots), as a Bokeh
walkthrough found it did not: a click there was logged on the component's host (a nameless
``generic``, the browser's retargeted ``event.target``), a choice in a select was not logged at
all (``change`` stays in the shadow root it happens in), and an answer's element got a CSS path
that starts inside the shadow root. Now the element itself is logged, with a path up the flat tree
(through the slot an element is drawn in, from a shadow root to its host), which is how the
observation describes it; the session becomes a task that ``tasks validate`` reaches in the
browser backend without edits."""

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

# A shop's order form drawn by a web component; its light child (the slotted heading) is drawn in
# the component's slot. Choosing a colour, typing a quantity and pressing Order shows the order.
HOME = b"""<!doctype html><html><head><title>Order</title></head><body>
<order-form><h2 slot="title">Teapots</h2></order-form>
<script>
customElements.define('order-form', class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<div class="card"><slot name="title"></slot><div><label for="c">Colour</label>' +
      '<select id="c"><option>Red</option><option>Cobalt</option></select></div>' +
      '<div><input aria-label="Quantity" value="1"></div><div><span class="order">Order</span></div>' +
      '<div><p id="out">Nothing ordered</p></div></div>';
    root.querySelector('.order').addEventListener('click', () => {
      root.getElementById('out').textContent = 'Ordered ' + root.querySelector('input').value + ' ' +
        root.getElementById('c').value + ' teapots';
    });
  }
});
</script></body></html>"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_role("combobox").select_option("Cobalt")
    page.get_by_label("Quantity").fill("3")
    page.get_by_text("Order", exact=True).click()
    shown = page.get_by_text("Ordered 3 Cobalt teapots")
    shown.wait_for()
    record_answer(page, "3 Cobalt", locator=shown, evidence=["Ordered 3 Cobalt teapots"])
'''


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        body, status = (HOME, 200) if self.path == "/" else (b"not found", 404)
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_steps_in_a_shadow_root_name_the_element_and_replay(tmp_path, cli):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}/"
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home"))
    (tmp_path / "order.py").write_text(SCRIPT)
    try:
        r = cli("record", "session", site, "--archive", tmp_path / "order.wfz", "--trajectory",
                tmp_path / "order.json", "--script", tmp_path / "order.py", timeout=300, env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    steps = json.loads((tmp_path / "order.json").read_text())["steps"]
    assert [s["action"] for s in steps] == ["navigate", "select", "type", "click", "answer"], steps
    select, typed, click, answer = steps[1:]
    assert select["target"]["tag"] == "select" and select["value"]["label"] == "Cobalt", select
    assert typed["target"]["tag"] == "input" and typed["value"] == "3", typed
    assert click["target"]["tag"] == "span" and click["target"]["text"] == "Order", click
    # paths from the document's root down the flat tree: the host, then what its shadow root holds
    host = "body:nth-of-type(1) > order-form:nth-of-type(1)"
    assert click["target"]["css"] == host + " > div:nth-of-type(1) > div:nth-of-type(3) > span:nth-of-type(1)"
    assert answer["target"]["css"] == "#out", answer
    assert select["target"]["css"] == "#c", select
    suite = tmp_path / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp_path / "order.json", "--answer", "3 Cobalt", "--id", "order",
            "--instruction", "Order three Cobalt teapots.", "--archive", tmp_path / "order.wfz", env=env)
    assert r.returncode == 0, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", "--out", tmp_path / "v", timeout=600,
            env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["expired"] == [], r.stdout + r.stderr
    actions = [s["action"] for s in json.loads((tmp_path / "v" / "trajectories" / "order.json").read_text())["steps"]]
    assert [a.split("(")[0] for a in actions] == ["select_option", "fill", "click", "send_msg_to_user"], actions
